package progcache

import (
	"context"
	"encoding/binary"
	"maps"
	"slices"
)

// Object is one compiled program: what a cache stores under a key.
// Caches never interpret Code; nothing is deserialised by reflection or
// executed.
type Object struct {
	// Kind is the code format: "cubin", "ptx", "ltoir", "fatbin", "hsaco",
	// "elf" or any other string.
	Kind string
	// Name is the program's name (e.g. NVRTC's program name).
	Name string
	// Code is the object code.
	Code []byte
	// Symbols maps name expressions to lowered (mangled) names.
	Symbols map[string]string
	// Metadata holds free-form string facts (compile log summary, flags).
	Metadata map[string]string
}

// Size is the number of bytes the object accounts for in an in-memory
// cache's byte cap: its code, kind, name, and symbol and metadata strings.
func (o Object) Size() int64 {
	n := int64(len(o.Code) + len(o.Kind) + len(o.Name))
	for k, v := range o.Symbols {
		n += int64(len(k) + len(v))
	}
	for k, v := range o.Metadata {
		n += int64(len(k) + len(v))
	}
	return n
}

// Equal reports whether o and p hold the same kind, name, code, symbols
// and metadata (a nil and an empty map are equal).
func (o Object) Equal(p Object) bool {
	return o.Kind == p.Kind && o.Name == p.Name && string(o.Code) == string(p.Code) &&
		maps.Equal(o.Symbols, p.Symbols) && maps.Equal(o.Metadata, p.Metadata)
}

// Clone returns a deep copy of o.
func (o Object) Clone() Object {
	o.Code = slices.Clone(o.Code)
	o.Symbols = maps.Clone(o.Symbols)
	o.Metadata = maps.Clone(o.Metadata)
	return o
}

// Cache stores compiled objects by key. Implementations in this module are
// safe for concurrent use; progcache/cachetest checks the contract.
//
// Get reports a miss as (Object{}, false, nil); a corrupt or tampered entry
// is a miss too (counted in Stats.Corrupt and removed), and so is an entry
// written under another configuration (counted in Stats.Unreadable and
// kept). Put
// replaces an existing entry. An object larger than the byte cap is not
// stored, evicts nothing and makes Put return an error wrapping ErrTooLarge.
// Delete of an absent key is not an error. After Close every method returns
// an error wrapping ErrClosed (Stats still works), and Close is idempotent.
type Cache interface {
	Get(ctx context.Context, k Key) (Object, bool, error)
	Put(ctx context.Context, k Key, obj Object) error
	Delete(ctx context.Context, k Key) error
	Len(ctx context.Context) (int, error)
	Clear(ctx context.Context) error
	Stats() Stats
	Close() error
}

// Stats are a cache's counters. Hits, Misses, Puts, Evictions, TooLarge and
// Corrupt count events seen by this cache value since it was opened;
// Entries and Bytes are the current contents as far as this value knows
// (persistent backends rescan when pruning).
type Stats struct {
	Entries    int64 `json:"entries"`
	Bytes      int64 `json:"bytes"`
	MaxEntries int64 `json:"max_entries"` // 0: no cap
	MaxBytes   int64 `json:"max_bytes"`   // 0: no cap
	Hits       int64 `json:"hits"`
	Misses     int64 `json:"misses"`
	Puts       int64 `json:"puts"`
	Evictions  int64 `json:"evictions"`
	TooLarge   int64 `json:"too_large"`
	Corrupt    int64 `json:"corrupt"`    // corrupt, foreign or tampered entries removed
	Unreadable int64 `json:"unreadable"` // entries of another configuration, kept (also counted in Misses)
}

// countersSize is the encoded size of the seven persistent counters;
// oldCountersSize, of the six written before Unreadable was counted.
const (
	countersSize    = 56
	oldCountersSize = 48
)

func (s *Stats) counters() []*int64 {
	return []*int64{&s.Hits, &s.Misses, &s.Puts, &s.Evictions, &s.TooLarge, &s.Corrupt, &s.Unreadable}
}

// addCounters adds the counts of now minus since to s.
func (s *Stats) addCounters(now, since Stats) {
	a, b, d := now.counters(), since.counters(), s.counters()
	for i := range d {
		*d[i] += *a[i] - *b[i]
	}
}

// encodeCounters writes hits, misses, puts, evictions, too-large, corrupt
// and unreadable as little-endian uint64s: the persistent form both Bolt (in its
// meta bucket) and FileStream (in stats/ files) keep.
func encodeCounters(s Stats) []byte {
	b := make([]byte, 0, countersSize)
	for _, p := range s.counters() {
		b = binary.LittleEndian.AppendUint64(b, uint64(*p))
	}
	return b
}

func decodeCounters(b []byte) (Stats, bool) {
	var s Stats
	if len(b) != countersSize && len(b) != oldCountersSize {
		return s, false
	}
	for i, p := range s.counters()[:len(b)/8] {
		*p = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return s, true
}
