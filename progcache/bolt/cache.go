package bolt

// Bolt: a one-file cache on bbolt.
//
// The file holds three buckets: "meta" (the schema version record),
// "entries" (key -> entry record, the same self-checking record FileStream
// writes) and "atime" (key -> last use, 8-byte little-endian Unix
// nanoseconds). bbolt lets one process open a file read-write at a time
// (it takes an exclusive flock), so while a Bolt is open it is the only
// writer and keeps the LRU order and byte total in memory, built from the
// atime bucket when the file is opened.
//
// Hits are read-aware without a write transaction per hit: Get records the
// use in memory (the in-memory LRU order is exact) and the access times are
// written in one transaction every accessBatch hits, before any Put, and on
// Close. A crash loses at most the unflushed access times, which only makes
// recency approximate.
//
// Get copies the value out of bbolt's memory map inside its read
// transaction and ends the transaction before decoding: bbolt's bytes are
// valid only while the transaction is open.
//
// Damage. What OpenBolt does with each kind of path, and when a file is
// ours to set aside, is in bolt_open.go; how a file is checked before bbolt
// maps it (bbolt panics, faults or recurses for ever on a damaged one) is
// in bolt_verify.go. A file locked by another process is never treated as
// damaged: OpenBolt fails with ErrLocked and leaves it untouched. Once
// open, every bbolt transaction runs in boltHandle.run, which turns a panic
// or a memory fault (a file truncated behind bbolt's back is SIGBUS) into a
// *boltDamage; the operation then sets the file aside and moves the cache
// to a fresh file (repairLocked): Get misses, Put is retried on the fresh
// file, Delete, Clear and Prune succeed on it, Totals and Entries report
// the damage with an error wrapping ErrCorrupt. Read-only, or through a
// symbolic link, the file is not moved and the cache is broken: every
// later operation returns that error.
//
// What this cannot make safe: the check covers the file as it was opened,
// under bbolt's advisory lock. A process that ignores the lock and rewrites
// pages of an open file so that a branch page points back up its tree can
// still send bbolt's cursor round the cycle until the goroutine's stack
// overflows, which is a fatal error, not a panic. Truncations and other
// overwrites are met as faults and panics and handled as above; a handle
// dropped because a panic left bbolt's locks held keeps its memory map
// until the process exits.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/counters"
	"github.com/accelkit/accelkit/progcache/internal/lru"
	bbolt "go.etcd.io/bbolt"
)

const (
	// boltSchema is the schema version record; a file with another value
	// is set aside and rebuilt.
	boltSchema = "accelkit/progcache/bolt/v1"
	// DefaultBoltTimeout is how long OpenBolt waits for another process's
	// lock before failing with ErrLocked.
	DefaultTimeout = time.Second
	// accessBatch is how many hits are gathered before their access times
	// are written in one transaction: one small write per this many hits
	// instead of one per hit.
	accessBatch = 256
)

// ErrLocked reports a bolt file held by another process past the open
// timeout. The file is not touched.
var ErrLocked = errors.New("progcache: cache file locked by another process")

var (
	bucketMeta    = []byte("meta")
	bucketEntries = []byte("entries")
	bucketATime   = []byte("atime")
	keySchema     = []byte("schema")
	keyCounters   = []byte("counters")
)

// BoltOptions configure a Bolt cache. The zero value is useful: no byte
// cap, a one-second lock timeout, CRC-32C records.
type Options struct {
	// MaxBytes caps the sum of stored record sizes; 0 means no cap. The
	// file itself is larger (pages, free list).
	MaxBytes int64
	// Timeout is how long to wait for a lock held by another process
	// before failing with ErrLocked; 0 means DefaultBoltTimeout.
	Timeout time.Duration
	// Record selects CRC-32C or a keyed MAC for entry records.
	Record progcache.RecordOptions
	// NoSync skips bbolt's fsync per commit: much faster puts, but a
	// crash can corrupt the file (it is then set aside and rebuilt on the
	// next open, losing the cache). Off by default.
	NoSync bool
	// ReadOnly opens an existing file for reading only, under bbolt's
	// shared lock (other read-only opens may share it; a read-write open
	// waits for it, and it for one): nothing is ever written, created,
	// set aside or rebuilt. A damaged file is an error wrapping
	// ErrCorrupt; Put, Delete, Clear, Prune and Entries with verify fail
	// with ErrReadOnly; Get of a corrupt entry is a counted miss that
	// leaves the entry in place; Close writes no access times or
	// counters.
	ReadOnly bool
	// Logger receives a warning when a damaged file is set aside; nil
	// means slog.Default().
	Logger *slog.Logger
}

var _ progcache.Admin = (*Cache)(nil)

// Bolt is a one-file cache on bbolt. It is safe for concurrent use by
// goroutines of one process; only one process may open the file at a time
// (others get ErrLocked), and the file must not live on a network
// filesystem, whose locks bbolt cannot trust: use FileStream to share a
// cache between processes or hosts.
//
// Locking: mu guards lru, pending, closed, broken, gen,
// setAside and the counters; it is held across bbolt write transactions
// (bbolt allows one writer anyway) but not across the read transactions of
// Get and Entries. dbMu guards h, the open file: every bbolt transaction
// holds it for reading, and replacing or closing h holds it for writing,
// so no transaction is open on a handle being closed. Lock order: mu, then
// dbMu; nothing takes mu while holding dbMu.
type Cache struct {
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

type boltEntry struct {
	key   progcache.Key
	size  int64
	atime int64
}

// OpenBolt opens or creates the cache file at path. A path that holds
// something other than a bolt cache of this package is refused with an
// error wrapping ErrNotCache and left as it is; a damaged cache file is set
// aside and rebuilt (see SetAside), or, read-only or behind a symbolic
// link, reported with an error wrapping ErrCorrupt.
func Open(path string, opts Options) (*Cache, error) {
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("progcache: bolt.Options.MaxBytes %d: want 0 (no cap) or a positive byte count: %w", opts.MaxBytes, progcache.ErrInvalidConfig)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("progcache: bolt.Options.Timeout %v: want 0 (DefaultTimeout) or a positive duration: %w", opts.Timeout, progcache.ErrInvalidConfig)
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
	h, es, err := c.openBolt(0)
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

func (c *Cache) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.closed {
		return fmt.Errorf("progcache: bolt file %s: %w", c.path, progcache.ErrClosed)
	}
	return c.broken
}

// writable refuses a change to a read-only cache.
func (c *Cache) writable() error {
	if c.opts.ReadOnly {
		return fmt.Errorf("progcache: bolt file %s: %w", c.path, progcache.ErrReadOnly)
	}
	return nil
}

// errNoHandle: the file was closed (Close, or damage that broke the cache)
// while an operation waited for it.
var errNoHandle = errors.New("progcache: bolt file not open")

// view runs fn in a read transaction on the open file and says which
// generation of it that was. It takes dbMu, not mu.
func (c *Cache) view(fn func(*bbolt.Tx) error) (uint64, error) {
	c.dbMu.RLock()
	defer c.dbMu.RUnlock()
	if c.h == nil {
		return 0, errNoHandle
	}
	return c.h.gen, c.h.run(false, fn)
}

// updateLocked runs fn in a write transaction; mu is held. Its results are
// those of settleLocked.
func (c *Cache) updateLocked(fn func(*bbolt.Tx) error) (rebuilt bool, err error) {
	c.dbMu.RLock()
	h := c.h
	if h == nil {
		err = errNoHandle
	} else {
		err = h.run(true, fn)
	}
	c.dbMu.RUnlock()
	if err == nil {
		return false, nil
	}
	return c.settleLocked(c.gen, err)
}

// boltRebuilt reports damage that was repaired: the file was set aside and
// the cache works on a new, empty file.
type boltRebuilt struct {
	path, aside string
	cause       error
}

func (e *boltRebuilt) Error() string {
	return fmt.Sprintf("progcache: bolt file %s was damaged (%v); set aside as %s and rebuilt empty", e.path, e.cause, e.aside)
}

func (e *boltRebuilt) Unwrap() error { return e.cause }

// settleLocked sorts out a transaction's error err on generation gen; mu
// is held. A closed handle gives ErrClosed or the broken error; damage is
// repaired (repairLocked): rebuilt is then true and err says what happened
// (wrapping ErrCorrupt), or the cache is broken and err says why. Other
// errors are returned as they are.
func (c *Cache) settleLocked(gen uint64, err error) (rebuilt bool, _ error) {
	var dmg *boltDamage
	switch {
	case errors.Is(err, errNoHandle):
		if c.closed {
			return false, fmt.Errorf("progcache: bolt file %s: %w", c.path, progcache.ErrClosed)
		}
		if c.broken != nil {
			return false, c.broken
		}
		return false, err
	case errors.As(err, &dmg):
		err = c.repairLocked(gen, err)
		var rb *boltRebuilt
		return errors.As(err, &rb), err
	}
	return false, err
}

// repairLocked handles damage (cause) met on generation gen; mu is held.
// It waits for the transactions in flight to end (dbMu), sets the file
// aside and opens a new one in its place, unless it may not move the file
// (read-only, a symbolic link) or cannot: then the cache is broken.
func (c *Cache) repairLocked(gen uint64, cause error) error {
	if c.closed {
		return fmt.Errorf("progcache: bolt file %s: %w", c.path, progcache.ErrClosed)
	}
	if c.broken != nil {
		return c.broken
	}
	if gen != c.gen {
		// Another operation met the damage first and moved to a new file.
		return &boltRebuilt{path: c.path, aside: c.setAside, cause: cause}
	}
	c.dbMu.Lock()
	defer c.dbMu.Unlock()
	h := c.h
	c.h = nil
	c.flushed = c.stats // the new file counts from here
	c.stats.Corrupt++
	c.lru.Purge()
	clear(c.pending)
	why := ""
	switch {
	case c.opts.ReadOnly:
		why = "opened read-only"
	case h.viaLink:
		why = "reached through a symbolic link"
	}
	if why != "" {
		h.close()
		c.broken = fmt.Errorf("progcache: bolt file %s is damaged (%w); %s, so it is not set aside: %w", c.path, cause, why, progcache.ErrCorrupt)
		return c.broken
	}
	aside, err := setAside(c.path, h.info, h.close)
	if err != nil {
		c.broken = fmt.Errorf("progcache: bolt file %s is damaged (%w) and could not be set aside: %w", c.path, cause, errors.Join(err, progcache.ErrCorrupt))
		return c.broken
	}
	c.opts.Logger.Warn("progcache: bolt file set aside and rebuilt", "path", c.path, "moved_to", aside, "reason", cause.Error())
	c.setAside = aside
	nh, es, err := c.openBolt(gen + 1)
	if err != nil {
		c.broken = fmt.Errorf("progcache: bolt file %s was damaged (%w) and set aside as %s, but no new file could be opened: %w", c.path, cause, aside, errors.Join(err, progcache.ErrCorrupt))
		return c.broken
	}
	c.h, c.gen = nh, nh.gen
	c.indexLocked(es)
	return &boltRebuilt{path: c.path, aside: c.setAside, cause: cause}
}

// keyMismatch is the corruption of a record found under another key than
// the one it was stored under.
func keyMismatch(stored, asked progcache.Key) error {
	return fmt.Errorf("progcache: entry stored under key %s found under %s: %w", stored, asked, progcache.ErrCorrupt)
}

// Get reads k's record, copying it out of the read transaction, verifies
// it and records the use. A corrupt entry is a miss, removed (kept when
// read-only) and counted; damage to the file is a miss too (see the top of
// this file).
func (c *Cache) Get(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	c.mu.Lock()
	if err := c.enter(ctx); err != nil {
		c.mu.Unlock()
		return progcache.Object{}, false, err
	}
	c.mu.Unlock()
	var rec []byte
	gen, err := c.view(func(tx *bbolt.Tx) error {
		eb, err := bucket(tx, bucketEntries)
		if err != nil {
			return err
		}
		if v := eb.Get(k[:]); v != nil {
			rec = append([]byte{}, v...) // v dies with the transaction
		}
		return nil
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		var dmg *boltDamage
		if errors.As(err, &dmg) {
			c.stats.Misses++
		}
		if rebuilt, err := c.settleLocked(gen, err); !rebuilt {
			return progcache.Object{}, false, fmt.Errorf("progcache: bolt get %s: %w", k, err)
		}
		return progcache.Object{}, false, nil
	}
	if rec == nil {
		c.stats.Misses++
		return progcache.Object{}, false, nil
	}
	sk, obj, derr := progcache.DecodeRecord(rec, c.opts.Record)
	if derr == nil && sk != k {
		derr = keyMismatch(sk, k)
	}
	if errors.Is(derr, progcache.ErrUnreadable) {
		// Written by a differently configured process: keep it.
		c.stats.Misses++
		c.stats.Unreadable++
		return progcache.Object{}, false, nil
	}
	if derr != nil {
		c.stats.Misses++
		c.stats.Corrupt++
		if c.closed || c.opts.ReadOnly || gen != c.gen {
			return progcache.Object{}, false, nil
		}
		return progcache.Object{}, false, c.deleteLocked(k)
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
	return obj, true, nil
}

// counterSet returns s's event counters in their persistent order
// (internal/counters); withCounters sets them in s.
func counterSet(s progcache.Stats) counters.Set {
	return counters.Set{s.Hits, s.Misses, s.Puts, s.Evictions, s.TooLarge, s.Corrupt, s.Unreadable}
}

func withCounters(s progcache.Stats, c counters.Set) progcache.Stats {
	s.Hits, s.Misses, s.Puts, s.Evictions, s.TooLarge, s.Corrupt, s.Unreadable = c[0], c[1], c[2], c[3], c[4], c[5], c[6]
	return s
}

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
	t.Add(counterSet(c.stats), counterSet(c.flushed))
	if err := tx.Bucket(bucketMeta).Put(keyCounters, t.Append(nil)); err != nil {
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
	if err := c.enter(ctx); err != nil {
		return progcache.Stats{}, err
	}
	var sum counters.Set
	gen, err := c.view(func(tx *bbolt.Tx) (err error) { sum, err = readCounters(tx); return err })
	if err != nil {
		if _, err := c.settleLocked(gen, err); err != nil {
			return progcache.Stats{}, err
		}
	}
	sum.Add(counterSet(c.stats), counterSet(c.flushed))
	t := withCounters(progcache.Stats{}, sum)
	t.Entries, t.Bytes, t.MaxBytes = int64(c.lru.Len()), c.lru.Bytes(), c.opts.MaxBytes
	return t, nil
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
		if err := at.Put(k[:], binary.LittleEndian.AppendUint64(nil, uint64(t))); err != nil {
			return err
		}
	}
	clear(c.pending)
	return nil
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
	if err := c.enter(ctx); err != nil {
		return err
	}
	if err := c.writable(); err != nil {
		return err
	}
	size := int64(len(rec))
	if c.opts.MaxBytes > 0 && size > c.opts.MaxBytes {
		c.stats.TooLarge++
		return fmt.Errorf("progcache: entry of %d bytes, bolt cap %d bytes: %w", size, c.opts.MaxBytes, progcache.ErrTooLarge)
	}
	rebuilt, err := c.putLocked(k, rec)
	if rebuilt {
		_, err = c.putLocked(k, rec)
	}
	if err != nil {
		return fmt.Errorf("progcache: bolt put %s: %w", k, err)
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
		if err := eb.Put(k[:], rec); err != nil {
			return err
		}
		return at.Put(k[:], binary.LittleEndian.AppendUint64(nil, uint64(now)))
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
		if err := entries.Delete(k[:]); err != nil {
			return err
		}
		if err := atimes.Delete(k[:]); err != nil {
			return err
		}
	}
	return nil
}

// removeLocked drops k from the in-memory index and the pending access
// times; mu is held.
func (c *Cache) removeLocked(k progcache.Key) {
	c.lru.Remove(k)
	delete(c.pending, k)
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
		return fmt.Errorf("progcache: bolt delete %s: %w", k, err)
	}
	c.removeLocked(k)
	return nil
}

// Delete removes k; an absent key is not an error.
func (c *Cache) Delete(ctx context.Context, k progcache.Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx); err != nil {
		return err
	}
	if err := c.writable(); err != nil {
		return err
	}
	return c.deleteLocked(k)
}

// Len returns the number of entries.
func (c *Cache) Len(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	return c.lru.Len(), nil
}

// Clear removes every entry.
func (c *Cache) Clear(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx); err != nil {
		return err
	}
	if err := c.writable(); err != nil {
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
		return fmt.Errorf("progcache: bolt clear: %w", err)
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
			return fmt.Errorf("progcache: close bolt file: %w", err)
		}
	}
	if ferr != nil {
		return fmt.Errorf("progcache: write access times: %w", ferr)
	}
	return nil
}

// Prune evicts least recently used entries until the records fit in
// maxBytes, and returns how many it evicted.
func (c *Cache) Prune(ctx context.Context, maxBytes int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	if err := c.writable(); err != nil {
		return 0, err
	}
	if maxBytes < 0 {
		return 0, fmt.Errorf("progcache: prune to %d bytes: want 0 or more: %w", maxBytes, progcache.ErrInvalidConfig)
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
		return 0, fmt.Errorf("progcache: bolt prune: %w", err)
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
	if err := c.enter(ctx); err != nil {
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
