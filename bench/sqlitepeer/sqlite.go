// Package sqlitepeer is a progcache.Cache on SQLite (modernc.org/sqlite, pure
// Go), the store CUDA Python's first persistent program cache used. It
// exists only so accbench can measure bbolt and filestream beside SQLite on
// the same workload; it lives in its own module so that neither the library
// modules nor the bench module require a SQLite driver, and it is never
// released.
//
// Entries are progcache's own checksummed records (EncodeRecord), one row
// per key, with an access time for least-recently-used eviction under a
// byte cap: the same contract as progcache's backends, checked by
// progcache/cachetest.
package sqlitepeer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelkit/accelkit/progcache"
	_ "modernc.org/sqlite"
)

// Cache is a SQLite-backed progcache.Cache. It is safe for concurrent use
// by multiple goroutines, Close included.
type Cache struct {
	// Locking: SQLite serialises writers; mu only guards the byte total
	// used for eviction, taken around each write transaction. life guards
	// closed and the open database: every operation holds it shared while
	// it uses db (enter), and Close holds it exclusively to close db, so no
	// query runs on a closed database. Lock order: life, then mu.

	db       *sql.DB
	maxBytes int64
	mu       sync.Mutex // serialises Put/Delete/Clear so the byte total stays exact
	life     sync.RWMutex
	closed   bool
	stats    struct {
		hits, misses, puts, evictions, tooLarge, corrupt atomic.Int64
	}
}

// Options configure Open. The zero value is a cache without a byte cap.
type Options struct {
	// MaxBytes caps the bytes of the stored records: a Put that goes over
	// evicts the least recently used entries, and a record over the cap
	// is refused (progcache.ErrTooLarge). 0 means no cap; a negative value
	// is an error.
	MaxBytes int64
}

// Open opens (creating if needed) the SQLite file at path. An option out of
// range is an error wrapping progcache.ErrInvalidConfig that names the
// field.
func Open(path string, opts Options) (*Cache, error) {
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("sqlitepeer: Options.MaxBytes %d: want 0 (no cap) or a positive byte count: %w", opts.MaxBytes, progcache.ErrInvalidConfig)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS entries (key BLOB PRIMARY KEY, record BLOB NOT NULL, size INTEGER NOT NULL, atime INTEGER NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitepeer: %s: %w", path, err)
	}
	if _, err := db.Exec(`CREATE INDEX IF NOT EXISTS entries_atime ON entries(atime)`); err != nil {
		db.Close()
		return nil, err
	}
	return &Cache{db: db, maxBytes: opts.MaxBytes}, nil
}

// enter takes life shared and checks closed and ctx; on success the caller
// must call c.life.RUnlock.
func (c *Cache) enter(ctx context.Context) error {
	c.life.RLock()
	if c.closed {
		c.life.RUnlock()
		return fmt.Errorf("sqlitepeer: %w", progcache.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		c.life.RUnlock()
		return err
	}
	return nil
}

// Get returns the object stored under k. A record that fails its checksum
// is a miss, removed and counted.
func (c *Cache) Get(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	if err := c.enter(ctx); err != nil {
		return progcache.Object{}, false, err
	}
	defer c.life.RUnlock()
	var rec []byte
	err := c.db.QueryRowContext(ctx, `SELECT record FROM entries WHERE key = ?`, k[:]).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		c.stats.misses.Add(1)
		return progcache.Object{}, false, nil
	}
	if err != nil {
		return progcache.Object{}, false, err
	}
	gotKey, obj, err := progcache.DecodeRecord(rec, progcache.RecordOptions{})
	if err != nil || gotKey != k {
		c.stats.corrupt.Add(1)
		c.stats.misses.Add(1)
		// Still a miss; a failed removal is returned, as progcache/bolt.Cache does,
		// since the entry will be found corrupt again.
		if err := c.delete(ctx, k); err != nil {
			return progcache.Object{}, false, fmt.Errorf("sqlitepeer: remove corrupt entry %s: %w", k, err)
		}
		return progcache.Object{}, false, nil
	}
	// Refresh the access time for LRU eviction; a failure here only ages
	// the entry.
	_, _ = c.db.ExecContext(ctx, `UPDATE entries SET atime = ? WHERE key = ?`, time.Now().UnixNano(), k[:])
	c.stats.hits.Add(1)
	return obj, true, nil
}

// Put stores obj under k, evicting least recently used entries beyond the
// byte cap. An object larger than the cap is refused with ErrTooLarge.
func (c *Cache) Put(ctx context.Context, k progcache.Key, obj progcache.Object) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	defer c.life.RUnlock()
	rec, err := progcache.EncodeRecord(k, obj, progcache.RecordOptions{})
	if err != nil {
		return err
	}
	if c.maxBytes > 0 && int64(len(rec)) > c.maxBytes {
		c.stats.tooLarge.Add(1)
		return fmt.Errorf("sqlitepeer: record of %d bytes exceeds the %d-byte cap: %w", len(rec), c.maxBytes, progcache.ErrTooLarge)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	// After Commit this is a no-op (sql.ErrTxDone); after an earlier error,
	// that error is the one to return.
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO entries (key, record, size, atime) VALUES (?, ?, ?, ?)`,
		k[:], rec, len(rec), time.Now().UnixNano()); err != nil {
		return err
	}
	if c.maxBytes > 0 {
		var total int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(size), 0) FROM entries`).Scan(&total); err != nil {
			return err
		}
		for total > c.maxBytes {
			var victim []byte
			var size int64
			if err := tx.QueryRowContext(ctx, `SELECT key, size FROM entries WHERE key != ? ORDER BY atime LIMIT 1`, k[:]).Scan(&victim, &size); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM entries WHERE key = ?`, victim); err != nil {
				return err
			}
			total -= size
			c.stats.evictions.Add(1)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	c.stats.puts.Add(1)
	return nil
}

// Delete removes k; an absent key is not an error.
func (c *Cache) Delete(ctx context.Context, k progcache.Key) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	defer c.life.RUnlock()
	return c.delete(ctx, k)
}

// delete is Delete for a caller holding life shared.
func (c *Cache) delete(ctx context.Context, k progcache.Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.db.ExecContext(ctx, `DELETE FROM entries WHERE key = ?`, k[:])
	return err
}

// Len counts entries.
func (c *Cache) Len(ctx context.Context) (int, error) {
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	defer c.life.RUnlock()
	var n int
	err := c.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM entries`).Scan(&n)
	return n, err
}

// Clear removes every entry.
func (c *Cache) Clear(ctx context.Context) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	defer c.life.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.db.ExecContext(ctx, `DELETE FROM entries`)
	return err
}

// Stats returns the counters and the current contents.
func (c *Cache) Stats() progcache.Stats {
	s := progcache.Stats{
		MaxBytes: c.maxBytes, Hits: c.stats.hits.Load(), Misses: c.stats.misses.Load(), Puts: c.stats.puts.Load(),
		Evictions: c.stats.evictions.Load(), TooLarge: c.stats.tooLarge.Load(), Corrupt: c.stats.corrupt.Load(),
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if !c.closed {
		// Stats has no error result: on a failed query Entries and Bytes
		// stay 0, the counters above are still right.
		_ = c.db.QueryRow(`SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries`).Scan(&s.Entries, &s.Bytes)
	}
	return s
}

// Close closes the database; it is idempotent.
func (c *Cache) Close() error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.db.Close()
}

var _ progcache.Cache = (*Cache)(nil)
