package redistier

// The key layout. Every key of a namespace starts with
// "progcache:<namespace>:", so an ACL key pattern (~progcache:<ns>:*)
// confines a Redis user to one deployment, and SCAN with that prefix finds
// them all:
//
//	progcache:<ns>:e:<64 hex>        an entry: one progcache record
//	progcache:<ns>:l:<64 hex>        a lease on a key (Acquire): a random token
//	progcache:<ns>:i:{<ns>}:lru      MaxBytes index: sorted set, key hex by last use
//	progcache:<ns>:i:{<ns>}:sizes    MaxBytes index: hash, key hex -> record bytes
//	progcache:<ns>:i:{<ns>}:bytes    MaxBytes index: the sum of sizes
//	progcache:<ns>:i:{<ns>}:tick     MaxBytes index: the use counter
//
// Entries and leases carry no hash tag, so a Redis Cluster spreads them
// over its masters by key. The index keys share the hash tag {<ns>}, so
// they live in one slot and one Lua script may touch them all; the
// scripts never touch an entry and an index key together (an entry lives
// in its own slot), which is why an eviction deletes its victims after the
// index script has chosen them.

import (
	"encoding/hex"

	"github.com/accelkit/accelkit/progcache"
)

// keyspace names the keys of one namespace.
type keyspace struct {
	prefix string // "progcache:<ns>:"
	// Index keys.
	lru, sizes, bytes, tick string
}

func newKeyspace(ns string) keyspace {
	p := "progcache:" + ns + ":"
	idx := p + "i:{" + ns + "}:"
	return keyspace{prefix: p, lru: idx + "lru", sizes: idx + "sizes", bytes: idx + "bytes", tick: idx + "tick"}
}

// entry returns the key of k's entry.
func (ks keyspace) entry(k progcache.Key) string { return ks.named("e:", k) }

// lease returns the key of k's lease.
func (ks keyspace) lease(k progcache.Key) string { return ks.named("l:", k) }

func (ks keyspace) named(kind string, k progcache.Key) string {
	b := make([]byte, 0, len(ks.prefix)+len(kind)+2*progcache.KeySize)
	b = append(b, ks.prefix...)
	b = append(b, kind...)
	return string(hex.AppendEncode(b, k[:]))
}

// member returns the name an entry has in the index: its key in hex.
func member(k progcache.Key) string { return hex.EncodeToString(k[:]) }

// entryOfMember returns the entry key of an index member.
func (ks keyspace) entryOfMember(m string) string { return ks.prefix + "e:" + m }

// entryPattern matches every entry (SCAN MATCH); dataPattern matches the
// entries and the index, what Clear removes (leases stay with their
// holders).
func (ks keyspace) entryPattern() string { return ks.prefix + "e:*" }
func (ks keyspace) dataPattern() string  { return ks.prefix + "[ei]:*" }
