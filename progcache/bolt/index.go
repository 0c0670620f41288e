package bolt

// The in-memory index: the LRU order, record sizes and access times of
// every entry (internal/lru, under Cache.mu), built from the atime bucket
// when the file is opened.
//
// Hits are read-aware without a write transaction per hit: Get records the
// use in memory (the in-memory LRU order is exact) and the access times are
// written in one transaction every accessBatch hits, before any Put, and on
// Close. A crash loses at most the unflushed access times, which only makes
// recency approximate.

import (
	"encoding/binary"
	"slices"

	"github.com/accelkit/accelkit/progcache"
	bbolt "go.etcd.io/bbolt"
)

type boltEntry struct {
	key   progcache.Key
	size  int64
	atime int64
}

// indexLocked builds the in-memory LRU from the entries read from the file.
func (c *Cache) indexLocked(es []*boltEntry) {
	sortByATime(es)
	for _, e := range es {
		c.lru.Add(e.key, e.atime, e.size)
	}
}

func sortByATime(es []*boltEntry) {
	// Oldest first, so PushFront leaves the newest at the front.
	slices.SortFunc(es, func(a, b *boltEntry) int {
		switch {
		case a.atime < b.atime:
			return -1
		case a.atime > b.atime:
			return 1
		}
		return 0
	})
}

// flushLocked writes the pending access times; it runs inside an update
// transaction with mu held.
func (c *Cache) flushLocked(tx *bbolt.Tx) error {
	at, err := bucket(tx, bucketATime)
	if err != nil {
		return err
	}
	for k, t := range c.pending {
		if !c.lru.Contains(k) {
			continue
		}
		if err := putValue(at, k[:], binary.LittleEndian.AppendUint64(nil, uint64(t))); err != nil {
			return err
		}
	}
	clear(c.pending)
	return nil
}

// removeLocked drops k from the in-memory index and the pending access
// times; mu is held.
func (c *Cache) removeLocked(k progcache.Key) {
	c.lru.Remove(k)
	delete(c.pending, k)
}
