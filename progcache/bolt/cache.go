package bolt

// Cache: a one-file cache on bbolt.
//
// The file holds three buckets: "meta" (the schema version record and the
// counters of every session), "entries" (key -> entry record, the same
// self-checking record filestream writes) and "atime" (key -> last use,
// 8-byte little-endian Unix nanoseconds). bbolt lets one process open a
// file read-write at a time (it takes an exclusive flock), so while a Cache
// is open it is the only writer and keeps the LRU order and byte total in
// memory (index.go), built from the atime bucket when the file is opened.
//
// Get and View copy the value out of bbolt's memory map inside their read
// transaction (Get into a fresh slice, View into a pooled one) and end the
// transaction before decoding: bbolt's bytes are valid only while the
// transaction is open, and a fault on a damaged file is caught only there.
//
// This file is the public surface. The rest, by concern: index.go (the
// in-memory LRU and the batched access times), admin.go (Entries, Prune,
// Totals and the stored counters), open.go (what Open does with each kind
// of path, and setting a damaged file aside), check.go with format.go,
// owner.go and walk.go (checking a file before bbolt maps it), handle.go
// (transactions that survive bbolt's panics and faults), repair.go (what
// an operation does with damage met while open), lock_*.go (bbolt's file
// lock, per platform).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/lru"
)

const (
	// boltSchema is the schema version record; a file with another value
	// is set aside and rebuilt.
	boltSchema = "accelkit/progcache/bolt/v1"
	// DefaultTimeout is how long Open waits for another process's lock
	// before failing with ErrLocked.
	DefaultTimeout = time.Second
	// accessBatch is how many hits are gathered before their access times
	// are written in one transaction: one small write per this many hits
	// instead of one per hit.
	accessBatch = 256
)

// ErrLocked reports a bolt file held by another process past the open
// timeout. The file is not touched.
var ErrLocked = errors.New("cache file locked by another process")

var (
	bucketMeta    = []byte("meta")
	bucketEntries = []byte("entries")
	bucketATime   = []byte("atime")
	keySchema     = []byte("schema")
	keyCounters   = []byte("counters")
)

// Options configure a Cache. The zero value is useful: no byte cap, a
// one-second lock timeout, CRC-32C records.
type Options struct {
	// MaxBytes caps the sum of stored record sizes; 0 means no cap. The
	// file itself is larger (pages, free list).
	MaxBytes int64
	// Timeout is how long to wait for a lock held by another process
	// before failing with ErrLocked; 0 means DefaultTimeout.
	Timeout time.Duration
	// Record selects CRC-32C (the zero value) or a keyed MAC for entry
	// records.
	Record progcache.RecordOptions
	// NoSync skips bbolt's fsync per commit: much faster puts, but a
	// crash can corrupt the file (it is then set aside and rebuilt on the
	// next open, losing the cache). Off by default.
	NoSync bool
	// ReadOnly opens an existing file for reading only, under bbolt's shared
	// lock (other read-only opens may share it; a read-write open waits for
	// it, and it for one): nothing is ever written, created, set aside or
	// rebuilt. A damaged file is an error wrapping progcache.ErrCorrupt;
	// Put, Delete, Clear, Prune and Entries with verify fail with
	// progcache.ErrReadOnly; Get of a corrupt entry is a counted miss that
	// leaves the entry in place; Close writes no access times or counters.
	ReadOnly bool
	// NoCreate opens only an existing cache of this package: a missing
	// path, an empty file, or a bbolt database with no buckets, which a
	// read-write open would make a cache, is refused with an error
	// wrapping progcache.ErrNotCache that names the path, and left as it
	// is. A damaged cache is still set aside, but not rebuilt: the open
	// (or the operation that met the damage) fails. For tools that
	// maintain a cache and must not make one where a user pointed by
	// mistake, like the progcache command.
	NoCreate bool
	// Logger receives a warning when a damaged file is set aside; nil
	// means slog.Default().
	Logger *slog.Logger
}

var (
	_ progcache.Admin   = (*Cache)(nil)
	_ progcache.Grouped = (*Cache)(nil)
	_ progcache.Viewer  = (*Cache)(nil)
)

// Cache is a one-file cache on bbolt. It is safe for concurrent use by
// goroutines of one process; only one process may open the file at a time
// (others get ErrLocked), and the file must not live on a network
// filesystem, whose locks bbolt cannot trust: use filestream.Cache to
// share a cache between processes or hosts.
type Cache struct {
	// Locking: mu guards lru, pending, closed, broken, gen, stats, setAside and
	// flushed (path and opts are set once, in Open); it is held across bbolt
	// write transactions (bbolt allows one writer anyway) but not across the
	// read transactions of Get and Entries. A function whose name ends in
	// Locked expects mu held (or runs in Open, before the cache is shared).
	// dbMu guards h, the open file: every bbolt transaction holds it for
	// reading, and replacing or closing h holds it for writing, so no
	// transaction is open on a handle being closed. Lock order: mu, then dbMu;
	// nothing takes mu while holding dbMu. group has its own lock and is never
	// held together with either.

	path string
	opts Options

	dbMu sync.RWMutex
	h    *boltHandle // nil once closed or broken

	mu       sync.Mutex
	lru      lru.LRU[progcache.Key, int64] // values: access times (Unix ns); sizes: record bytes
	pending  map[progcache.Key]int64       // access times not yet written
	closed   bool
	broken   error  // set when damage could not be repaired: every operation returns it
	gen      uint64 // h.gen: which file the in-memory state describes
	stats    progcache.Stats
	setAside string          // where the last damaged file was moved, if anywhere
	flushed  progcache.Stats // the part of stats already added to the file's counters

	group progcache.Group // GetOrCompile's in-process deduplication; own lock
}

// Open opens or creates the cache file at path. A path that holds
// something other than a bolt cache of this package is refused with an
// error wrapping progcache.ErrNotCache and left as it is; a damaged cache
// file is set aside and rebuilt (see SetAside), or, read-only or behind a
// symbolic link, reported with an error wrapping progcache.ErrCorrupt. An
// option out of range is an error wrapping progcache.ErrInvalidConfig
// that names it.
func Open(path string, opts Options) (*Cache, error) {
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("bolt: Options.MaxBytes %d: want 0 (no cap) or a positive byte count: %w", opts.MaxBytes, progcache.ErrInvalidConfig)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("bolt: Options.Timeout %v: want 0 (DefaultTimeout) or a positive duration: %w", opts.Timeout, progcache.ErrInvalidConfig)
	}
	if err := opts.Record.Validate(); err != nil {
		return nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Cache{path: path, opts: opts, pending: map[progcache.Key]int64{}}
	h, es, err := c.openFileLocked(0)
	if err != nil {
		return nil, err
	}
	c.h = h
	c.indexLocked(es)
	return c, nil
}

// Group returns the Group that GetOrCompile uses for this cache.
func (c *Cache) Group() *progcache.Group { return &c.group }

// SetAside returns where a damaged file was moved when this cache was
// opened, or later when damage was found in use, or "".
func (c *Cache) SetAside() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setAside
}

// enterLocked checks ctx and that the cache is open and not broken; mu is
// held.
func (c *Cache) enterLocked(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.closed {
		return fmt.Errorf("bolt: file %s: %w", c.path, progcache.ErrClosed)
	}
	return c.broken
}

// enterWriteLocked is enterLocked for an operation that changes the file:
// it also refuses a read-only cache; mu is held.
func (c *Cache) enterWriteLocked(ctx context.Context) error {
	if err := c.enterLocked(ctx); err != nil {
		return err
	}
	return c.writable()
}

// writable refuses a change to a read-only cache.
func (c *Cache) writable() error {
	if c.opts.ReadOnly {
		return fmt.Errorf("bolt: file %s: %w", c.path, progcache.ErrReadOnly)
	}
	return nil
}

// keyMismatch is the corruption of a record found under another key than
// the one it was stored under.
func keyMismatch(stored, asked progcache.Key) error {
	return fmt.Errorf("bolt: entry stored under key %s found under %s: %w", stored, asked, progcache.ErrCorrupt)
}

// Get reads k's record, copying it out of the read transaction, verifies
// it and records the use. A corrupt entry is a miss, removed (kept when
// read-only) and counted; damage to the file is a miss too (see the top of
// this file).
func (c *Cache) Get(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	var obj progcache.Object
	ok, err := c.read(ctx, k, nil, func(rec []byte) (sk progcache.Key, err error) {
		sk, obj, err = progcache.DecodeRecord(rec, c.opts.Record) // obj.Code aliases rec
		return sk, err
	})
	return obj, ok, err
}

// View lends fn the entry's record, copied out of bbolt's memory map into
// a buffer this cache reuses, so a hit allocates nothing of its own (see
// progcache.Viewer). The copy is made inside the read transaction, where a
// fault on a damaged file is caught; fn runs after the transaction ends
// and no lock is held, so it may call the cache.
func (c *Cache) View(ctx context.Context, k progcache.Key, fn func(progcache.View) error) (bool, error) {
	bp := recordBufs.Get().(*[]byte)
	defer recordBufs.Put(bp)
	var v progcache.View
	ok, err := c.read(ctx, k, bp, func(rec []byte) (sk progcache.Key, err error) {
		sk, v, err = progcache.ViewRecord(rec, c.opts.Record)
		return sk, err
	})
	if !ok || err != nil {
		return ok, err
	}
	return true, fn(v)
}

// recordBufs pools View's record buffers (*[]byte).
var recordBufs = sync.Pool{New: func() any { return new([]byte) }}

// read looks k up, copies its record into *buf (grown as needed and kept
// there for reuse; a fresh slice when buf is nil) and checks it with
// parse, which returns the key stored in it. It reports a hit only for a
// record that parses under k, and counts and repairs as Get documents.
func (c *Cache) read(ctx context.Context, k progcache.Key, buf *[]byte, parse func(rec []byte) (progcache.Key, error)) (bool, error) {
	c.mu.Lock()
	if err := c.enterLocked(ctx); err != nil {
		c.mu.Unlock()
		return false, err
	}
	c.mu.Unlock()
	var rec []byte
	gen, found, err := c.viewShared(k[:], func(v []byte) {
		// v dies with the transaction.
		if buf != nil {
			*buf = append((*buf)[:0], v...)
			rec = *buf
		} else {
			rec = append([]byte{}, v...)
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		var dmg *boltDamage
		if errors.As(err, &dmg) {
			c.stats.Misses++
		}
		if rebuilt, err := c.settleLocked(gen, err); !rebuilt {
			return false, fmt.Errorf("bolt: get %s: %w", k, err)
		}
		return false, nil
	}
	if !found {
		c.stats.Misses++
		return false, nil
	}
	sk, derr := parse(rec)
	if derr == nil && sk != k {
		derr = keyMismatch(sk, k)
	}
	if errors.Is(derr, progcache.ErrUnreadable) {
		// Written by a differently configured process: keep it.
		c.stats.Misses++
		c.stats.Unreadable++
		return false, nil
	}
	if derr != nil {
		c.stats.Misses++
		c.stats.Corrupt++
		if c.closed || c.opts.ReadOnly || gen != c.gen {
			return false, nil
		}
		return false, c.deleteLocked(k)
	}
	c.stats.Hits++
	if e, ok := c.lru.Get(k); ok && gen == c.gen {
		now := time.Now().UnixNano()
		e.Value = now
		if !c.opts.ReadOnly && !c.closed {
			c.pending[k] = now
			if len(c.pending) >= accessBatch {
				// Recency is best effort: damage was already dealt with
				// by updateLocked, and the hit stands either way.
				_, _ = c.updateLocked(c.flushLocked)
			}
		}
	}
	return true, nil
}

// Put stores obj under k and evicts least recently used entries past the
// byte cap, in one transaction. Damage met on the way moves the cache to a
// new file (see the top of this file), where the put is made again.
func (c *Cache) Put(ctx context.Context, k progcache.Key, obj progcache.Object) error {
	rec, err := progcache.EncodeRecord(k, obj, c.opts.Record)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enterWriteLocked(ctx); err != nil {
		return err
	}
	size := int64(len(rec))
	if c.opts.MaxBytes > 0 && size > c.opts.MaxBytes {
		c.stats.TooLarge++
		return fmt.Errorf("bolt: entry of %d bytes, bolt cap %d bytes: %w", size, c.opts.MaxBytes, progcache.ErrTooLarge)
	}
	rebuilt, err := c.putLocked(k, rec)
	if rebuilt {
		_, err = c.putLocked(k, rec)
	}
	if err != nil {
		return fmt.Errorf("bolt: put %s: %w", k, err)
	}
	return nil
}

func (c *Cache) putLocked(k progcache.Key, rec []byte) (rebuilt bool, err error) {
	size := int64(len(rec))
	now := time.Now().UnixNano()
	var victims []progcache.Key
	bytes := c.lru.Bytes() + size
	if e, ok := c.lru.Peek(k); ok {
		bytes -= e.Size
	}
	for e := range c.lru.Oldest() {
		if c.opts.MaxBytes == 0 || bytes <= c.opts.MaxBytes {
			break
		}
		if e.Key != k {
			victims = append(victims, e.Key)
			bytes -= e.Size
		}
	}
	rebuilt, err = c.updateLocked(func(tx *bbolt.Tx) error {
		if err := c.flushLocked(tx); err != nil {
			return err
		}
		eb, err := bucket(tx, bucketEntries)
		if err != nil {
			return err
		}
		at := tx.Bucket(bucketATime)
		if err := deleteKeys(eb, at, victims); err != nil {
			return err
		}
		if err := putValue(eb, k[:], rec); err != nil {
			return err
		}
		return putValue(at, k[:], binary.LittleEndian.AppendUint64(nil, uint64(now)))
	})
	if err != nil {
		return rebuilt, err
	}
	for _, v := range victims {
		c.removeLocked(v)
		c.stats.Evictions++
	}
	c.lru.Add(k, now, size)
	c.stats.Puts++
	return false, nil
}

// deleteKeys deletes keys from the entries and access-time buckets, inside
// the caller's write transaction.
func deleteKeys(entries, atimes *bbolt.Bucket, keys []progcache.Key) error {
	for _, k := range keys {
		if err := deleteValue(entries, k[:]); err != nil {
			return err
		}
		if err := deleteValue(atimes, k[:]); err != nil {
			return err
		}
	}
	return nil
}

// deleteLocked removes k from the file and the index; on a file found
// damaged and rebuilt, k is gone with it.
func (c *Cache) deleteLocked(k progcache.Key) error {
	rebuilt, err := c.updateLocked(func(tx *bbolt.Tx) error {
		eb, err := bucket(tx, bucketEntries)
		if err != nil {
			return err
		}
		return deleteKeys(eb, tx.Bucket(bucketATime), []progcache.Key{k})
	})
	if rebuilt {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bolt: delete %s: %w", k, err)
	}
	c.removeLocked(k)
	return nil
}

// Delete removes k; an absent key is not an error.
func (c *Cache) Delete(ctx context.Context, k progcache.Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enterWriteLocked(ctx); err != nil {
		return err
	}
	return c.deleteLocked(k)
}

// Len returns the number of entries.
func (c *Cache) Len(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enterLocked(ctx); err != nil {
		return 0, err
	}
	return c.lru.Len(), nil
}

// Clear removes every entry.
func (c *Cache) Clear(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enterWriteLocked(ctx); err != nil {
		return err
	}
	rebuilt, err := c.updateLocked(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketEntries, bucketATime} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
	if rebuilt {
		return nil // the new file is empty
	}
	if err != nil {
		return fmt.Errorf("bolt: clear: %w", err)
	}
	c.lru.Purge()
	clear(c.pending)
	return nil
}

// Stats returns this cache value's counters and the current contents.
func (c *Cache) Stats() progcache.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes, s.MaxBytes = int64(c.lru.Len()), c.lru.Bytes(), c.opts.MaxBytes
	return s
}

// Close writes pending access times and counters (read-write only) and
// closes the file, releasing the lock. It is idempotent.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	var ferr error
	if c.broken == nil && !c.opts.ReadOnly && (len(c.pending) > 0 || c.stats != c.flushed) {
		_, ferr = c.updateLocked(func(tx *bbolt.Tx) error {
			if err := c.flushLocked(tx); err != nil {
				return err
			}
			return c.flushCountersLocked(tx)
		})
	}
	c.closed = true
	c.dbMu.Lock()
	h := c.h
	c.h = nil
	c.dbMu.Unlock()
	if h != nil {
		if err := h.close(); err != nil {
			return fmt.Errorf("bolt: close file: %w", err)
		}
	}
	if ferr != nil {
		return fmt.Errorf("bolt: write access times: %w", ferr)
	}
	return nil
}
