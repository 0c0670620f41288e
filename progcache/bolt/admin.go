package bolt

// What the progcache command runs on a bolt file (progcache.Admin):
// Entries, Prune and Totals, and the counters of every session that Totals
// reads, kept as one running total in the meta bucket.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/counters"
	bbolt "go.etcd.io/bbolt"
)

// Persistent counters: the meta bucket's "counters" record holds the hits,
// misses, puts, evictions, too-large, corrupt and unreadable counts of
// every session, as little-endian uint64s, so the CLI can report them like
// ccache -s.
func readCounters(tx *bbolt.Tx) (counters.Set, error) {
	mb, err := bucket(tx, bucketMeta)
	if err != nil {
		return counters.Set{}, err
	}
	s, _ := counters.Parse(mb.Get(keyCounters))
	return s, nil
}

// flushCountersLocked adds the counts since the last flush to the file's
// counters; it runs inside an update transaction with mu held.
func (c *Cache) flushCountersLocked(tx *bbolt.Tx) error {
	t, err := readCounters(tx)
	if err != nil {
		return err
	}
	t.Add(counters.Of(c.stats), counters.Of(c.flushed))
	if err := putValue(tx.Bucket(bucketMeta), keyCounters, t.Append(nil)); err != nil {
		return err
	}
	c.flushed = c.stats
	return nil
}

// Totals returns the counters of every session that used the file
// (including this one's unflushed counts) and the current contents.
func (c *Cache) Totals(ctx context.Context) (progcache.Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enterLocked(ctx); err != nil {
		return progcache.Stats{}, err
	}
	var sum counters.Set
	gen, err := c.view(func(tx *bbolt.Tx) (err error) { sum, err = readCounters(tx); return err })
	if err != nil {
		if _, err := c.settleLocked(gen, err); err != nil {
			return progcache.Stats{}, err
		}
	}
	sum.Add(counters.Of(c.stats), counters.Of(c.flushed))
	t := sum.Into(progcache.Stats{})
	t.Entries, t.Bytes, t.MaxBytes = int64(c.lru.Len()), c.lru.Bytes(), c.opts.MaxBytes
	return t, nil
}

// Prune evicts least recently used entries until the records fit in
// maxBytes, and returns how many it evicted.
func (c *Cache) Prune(ctx context.Context, maxBytes int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enterWriteLocked(ctx); err != nil {
		return 0, err
	}
	if maxBytes < 0 {
		return 0, fmt.Errorf("bolt: prune to %d bytes: want 0 or more: %w", maxBytes, progcache.ErrInvalidConfig)
	}
	var victims []progcache.Key
	bytes := c.lru.Bytes()
	for e := range c.lru.Oldest() {
		if maxBytes == 0 || bytes <= maxBytes {
			break
		}
		victims = append(victims, e.Key)
		bytes -= e.Size
	}
	if len(victims) == 0 {
		return 0, nil
	}
	rebuilt, err := c.updateLocked(func(tx *bbolt.Tx) error {
		eb, err := bucket(tx, bucketEntries)
		if err != nil {
			return err
		}
		return deleteKeys(eb, tx.Bucket(bucketATime), victims)
	})
	if rebuilt {
		return 0, nil // the new file is empty
	}
	if err != nil {
		return 0, fmt.Errorf("bolt: prune: %w", err)
	}
	for _, v := range victims {
		c.removeLocked(v)
		c.stats.Evictions++
	}
	return len(victims), nil
}

// Entries lists the entries, least recently used first, decoding each;
// with verify set, corrupt entries are removed and counted, otherwise
// reported with Err set. Verify needs a read-write cache (ErrReadOnly).
// Damage to the file ends the listing with an error wrapping ErrCorrupt.
func (c *Cache) Entries(ctx context.Context, verify bool) ([]progcache.EntryInfo, error) {
	c.mu.Lock()
	if err := c.enterLocked(ctx); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if verify {
		if err := c.writable(); err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	var keys []boltEntry
	for e := range c.lru.Oldest() {
		keys = append(keys, boltEntry{key: e.Key, size: e.Size, atime: e.Value})
	}
	gen0 := c.gen
	c.mu.Unlock()
	out := make([]progcache.EntryInfo, 0, len(keys))
	for _, be := range keys {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		var rec []byte
		gen, err := c.view(func(tx *bbolt.Tx) error {
			eb, err := bucket(tx, bucketEntries)
			if err != nil {
				return err
			}
			if v := eb.Get(be.key[:]); v != nil {
				rec = append([]byte{}, v...)
			}
			return nil
		})
		if err == nil && gen != gen0 {
			err = &boltDamage{cause: "found by another operation during the listing"}
			gen = gen0
		}
		if err != nil {
			c.mu.Lock()
			_, err = c.settleLocked(gen, err)
			c.mu.Unlock()
			return out, err
		}
		if rec == nil {
			continue
		}
		ei := progcache.EntryInfo{Key: be.key, Size: int64(len(rec)), Used: time.Unix(0, be.atime)}
		sk, obj, err := progcache.DecodeRecord(rec, c.opts.Record)
		if err == nil && sk != be.key {
			err = keyMismatch(sk, be.key)
		}
		if err != nil {
			ei.Err = err.Error()
			ei.Unreadable = errors.Is(err, progcache.ErrUnreadable)
			if verify && !ei.Unreadable {
				c.mu.Lock()
				c.stats.Corrupt++
				derr := c.deleteLocked(be.key)
				c.mu.Unlock()
				if derr != nil {
					return out, derr
				}
			}
		} else {
			ei.Kind, ei.Name, ei.CodeLen = obj.Kind, obj.Name, len(obj.Code)
		}
		out = append(out, ei)
	}
	return out, nil
}
