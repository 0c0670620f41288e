package progcache

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
// A file that bbolt cannot open as a database, or a database without this
// schema's version record, is moved aside (renamed to <path>.corrupt-<time>)
// and a new file is built; a file locked by another process is never
// treated that way: Open fails with ErrLocked and leaves it untouched.

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

const (
	// boltSchema is the schema version record; a file with another value
	// is set aside and rebuilt.
	boltSchema = "accelkit/progcache/bolt/v1"
	// DefaultBoltTimeout is how long OpenBolt waits for another process's
	// lock before failing with ErrLocked.
	DefaultBoltTimeout = time.Second
	// accessBatch is how many hits are gathered before their access times
	// are written in one transaction: one small write per this many hits
	// instead of one per hit.
	accessBatch = 256
)

var (
	bucketMeta    = []byte("meta")
	bucketEntries = []byte("entries")
	bucketATime   = []byte("atime")
	keySchema     = []byte("schema")
	keyCounters   = []byte("counters")
)

// BoltOptions configure a Bolt cache. The zero value is useful: no byte
// cap, a one-second lock timeout, CRC-32C records.
type BoltOptions struct {
	// MaxBytes caps the sum of stored record sizes; 0 means no cap. The
	// file itself is larger (pages, free list).
	MaxBytes int64
	// Timeout is how long to wait for a lock held by another process
	// before failing with ErrLocked; 0 means DefaultBoltTimeout.
	Timeout time.Duration
	// Record selects CRC-32C or a keyed MAC for entry records.
	Record RecordOptions
	// NoSync skips bbolt's fsync per commit: much faster puts, but a
	// crash can corrupt the file (it is then set aside and rebuilt on the
	// next open, losing the cache). Off by default.
	NoSync bool
	// Logger receives a warning when a corrupt or foreign file is set
	// aside; nil means slog.Default().
	Logger *slog.Logger
}

// Bolt is a one-file cache on bbolt. It is safe for concurrent use by
// goroutines of one process; only one process may open the file at a time
// (others get ErrLocked), and the file must not live on a network
// filesystem, whose locks bbolt cannot trust: use FileStream to share a
// cache between processes or hosts.
//
// Locking: mu guards lru, index, bytes, pending, closed and the counters;
// it is held across bbolt write transactions (bbolt allows one writer
// anyway) but not across Get's read transaction.
type Bolt struct {
	db   *bolt.DB
	path string
	opts BoltOptions

	mu       sync.Mutex
	lru      *list.List // of *boltEntry, most recent at the front
	index    map[Key]*list.Element
	bytes    int64
	pending  map[Key]int64 // access times not yet written
	closed   bool
	stats    Stats
	setAside string // where a corrupt file was moved at open, if any
	flushed  Stats  // the part of stats already added to the file's counters

	flight flightGroup // GetOrCompile's in-process deduplication; own lock
}

type boltEntry struct {
	key   Key
	size  int64
	atime int64
}

// OpenBolt opens or creates the cache file at path.
func OpenBolt(path string, opts BoltOptions) (*Bolt, error) {
	if opts.MaxBytes < 0 || opts.Timeout < 0 {
		return nil, fmt.Errorf("progcache: bolt cap %d bytes, timeout %v: must be 0 (default) or positive: %w", opts.MaxBytes, opts.Timeout, ErrInvalidConfig)
	}
	if err := opts.Record.validate(); err != nil {
		return nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultBoltTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Bolt{path: path, opts: opts, lru: list.New(), index: map[Key]*list.Element{}, pending: map[Key]int64{}}
	db, err := c.open()
	if err != nil {
		return nil, err
	}
	c.db = db
	if err := c.load(); err != nil {
		db.Close()
		return nil, err
	}
	return c, nil
}

// open opens the file, setting aside and rebuilding one that is not a
// database of this schema.
func (c *Bolt) open() (*bolt.DB, error) {
	for attempt := 0; ; attempt++ {
		db, err := bolt.Open(c.path, filePerm, &bolt.Options{Timeout: c.opts.Timeout, NoSync: c.opts.NoSync})
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return nil, fmt.Errorf("progcache: bolt file %s is held by another process (waited %v): bbolt allows one read-write process at a time and is unsafe on network filesystems; use a FileStream directory to share a cache: %w", c.path, c.opts.Timeout, ErrLocked)
		case errors.Is(err, fs.ErrPermission), errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("progcache: open bolt file: %w", err)
		case err == nil:
			ok, verr := c.checkSchema(db)
			if verr != nil {
				db.Close()
				return nil, verr
			}
			if ok {
				return db, nil
			}
			db.Close()
			err = errors.New("not a progcache bolt file of schema " + boltSchema)
		}
		if attempt > 0 {
			return nil, fmt.Errorf("progcache: bolt file %s unusable after rebuild: %w", c.path, err)
		}
		aside := fmt.Sprintf("%s.corrupt-%d", c.path, time.Now().UnixNano())
		if rerr := os.Rename(c.path, aside); rerr != nil {
			return nil, fmt.Errorf("progcache: bolt file %s is unreadable (%v) and could not be set aside: %w", c.path, err, rerr)
		}
		c.opts.Logger.Warn("progcache: bolt file set aside and rebuilt", "path", c.path, "moved_to", aside, "reason", err.Error())
		c.setAside = aside
		c.stats.Corrupt++
	}
}

// checkSchema creates the buckets in an empty file and reports whether the
// file carries this schema's version record.
func (c *Bolt) checkSchema(db *bolt.DB) (bool, error) {
	ok, empty := false, true
	err := db.View(func(tx *bolt.Tx) error {
		tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if meta := tx.Bucket(bucketMeta); meta != nil {
			ok = string(meta.Get(keySchema)) == boltSchema && tx.Bucket(bucketEntries) != nil && tx.Bucket(bucketATime) != nil
		}
		return nil
	})
	if err == nil && empty {
		// A new file: create the buckets and the version record. Opening
		// an existing file writes nothing.
		err = db.Update(func(tx *bolt.Tx) error {
			for _, b := range [][]byte{bucketMeta, bucketEntries, bucketATime} {
				if _, err := tx.CreateBucket(b); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMeta).Put(keySchema, []byte(boltSchema))
		})
		ok = err == nil
	}
	if err != nil {
		return false, fmt.Errorf("progcache: initialise bolt file %s: %w", c.path, err)
	}
	return ok, nil
}

// SetAside returns where a corrupt or foreign file was moved when this
// cache was opened, or "".
func (c *Bolt) SetAside() string { return c.setAside }

// load builds the in-memory LRU from the atime bucket.
func (c *Bolt) load() error {
	var es []*boltEntry
	err := c.db.View(func(tx *bolt.Tx) error {
		at := tx.Bucket(bucketATime)
		return tx.Bucket(bucketEntries).ForEach(func(k, v []byte) error {
			if len(k) != KeySize {
				return nil
			}
			e := &boltEntry{size: int64(len(v))}
			copy(e.key[:], k)
			if t := at.Get(k); len(t) == 8 {
				e.atime = int64(binary.LittleEndian.Uint64(t))
			}
			es = append(es, e)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("progcache: read bolt file %s: %w", c.path, err)
	}
	sortByATime(es)
	for _, e := range es {
		c.index[e.key] = c.lru.PushFront(e)
		c.bytes += e.size
	}
	return nil
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

func (c *Bolt) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.closed {
		return fmt.Errorf("progcache: bolt file %s: %w", c.path, ErrClosed)
	}
	return nil
}

// Get reads k's record, copying it out of the read transaction, verifies
// it and records the use. A corrupt entry is a miss, removed and counted.
func (c *Bolt) Get(ctx context.Context, k Key) (Object, bool, error) {
	c.mu.Lock()
	if err := c.enter(ctx); err != nil {
		c.mu.Unlock()
		return Object{}, false, err
	}
	c.mu.Unlock()
	var rec []byte
	err := c.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketEntries).Get(k[:]); v != nil {
			rec = append([]byte{}, v...) // v dies with the transaction
		}
		return nil
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.closed { // closed while reading
			return Object{}, false, fmt.Errorf("progcache: bolt file %s: %w", c.path, ErrClosed)
		}
		return Object{}, false, fmt.Errorf("progcache: bolt get %s: %w", k, err)
	}
	if rec == nil {
		c.stats.Misses++
		return Object{}, false, nil
	}
	sk, obj, derr := DecodeRecord(rec, c.opts.Record)
	if derr == nil && sk != k {
		derr = corruptf("entry stored under key %s found under %s", sk, k)
	}
	if errors.Is(derr, ErrUnreadable) {
		// Written by a differently configured process: keep it.
		c.stats.Misses++
		c.stats.Unreadable++
		return Object{}, false, nil
	}
	if derr != nil {
		c.stats.Misses++
		c.stats.Corrupt++
		if c.closed {
			return Object{}, false, nil
		}
		return Object{}, false, c.deleteLocked(k)
	}
	c.stats.Hits++
	if e, ok := c.index[k]; ok {
		c.lru.MoveToFront(e)
		now := time.Now().UnixNano()
		e.Value.(*boltEntry).atime = now
		c.pending[k] = now
		if len(c.pending) >= accessBatch && !c.closed {
			if err := c.db.Update(c.flushLocked); err != nil {
				return obj, true, nil // recency is best effort
			}
		}
	}
	return obj, true, nil
}

// Persistent counters: the meta bucket's "counters" record holds the hits,
// misses, puts, evictions, too-large and corrupt counts of every session,
// as six little-endian uint64s, so the CLI can report them like ccache -s.
func readCounters(tx *bolt.Tx) Stats {
	s, _ := decodeCounters(tx.Bucket(bucketMeta).Get(keyCounters))
	return s
}

// flushCountersLocked adds the counts since the last flush to the file's
// counters; it runs inside an update transaction with mu held.
func (c *Bolt) flushCountersLocked(tx *bolt.Tx) error {
	t := readCounters(tx)
	t.addCounters(c.stats, c.flushed)
	b := encodeCounters(t)
	if err := tx.Bucket(bucketMeta).Put(keyCounters, b); err != nil {
		return err
	}
	c.flushed = c.stats
	return nil
}

// Totals returns the counters of every session that used the file
// (including this one's unflushed counts) and the current contents.
func (c *Bolt) Totals(ctx context.Context) (Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t Stats
	if err := c.enter(ctx); err != nil {
		return t, err
	}
	err := c.db.View(func(tx *bolt.Tx) error { t = readCounters(tx); return nil })
	t.addCounters(c.stats, c.flushed)
	t.Entries, t.Bytes, t.MaxBytes = int64(c.lru.Len()), c.bytes, c.opts.MaxBytes
	return t, err
}

// flushLocked writes the pending access times; it runs inside an update
// transaction with mu held.
func (c *Bolt) flushLocked(tx *bolt.Tx) error {
	at := tx.Bucket(bucketATime)
	for k, t := range c.pending {
		if _, ok := c.index[k]; !ok {
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
// byte cap, in one transaction.
func (c *Bolt) Put(ctx context.Context, k Key, obj Object) error {
	rec, err := EncodeRecord(k, obj, c.opts.Record)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx); err != nil {
		return err
	}
	size := int64(len(rec))
	if c.opts.MaxBytes > 0 && size > c.opts.MaxBytes {
		c.stats.TooLarge++
		return fmt.Errorf("progcache: entry of %d bytes, bolt cap %d bytes: %w", size, c.opts.MaxBytes, ErrTooLarge)
	}
	now := time.Now().UnixNano()
	var victims []*list.Element
	bytes := c.bytes + size
	if e, ok := c.index[k]; ok {
		bytes -= e.Value.(*boltEntry).size
	}
	for e := c.lru.Back(); c.opts.MaxBytes > 0 && bytes > c.opts.MaxBytes && e != nil; e = e.Prev() {
		if be := e.Value.(*boltEntry); be.key != k {
			victims = append(victims, e)
			bytes -= be.size
		}
	}
	err = c.db.Update(func(tx *bolt.Tx) error {
		if err := c.flushLocked(tx); err != nil {
			return err
		}
		eb, at := tx.Bucket(bucketEntries), tx.Bucket(bucketATime)
		for _, v := range victims {
			vk := v.Value.(*boltEntry).key
			if err := eb.Delete(vk[:]); err != nil {
				return err
			}
			if err := at.Delete(vk[:]); err != nil {
				return err
			}
		}
		if err := eb.Put(k[:], rec); err != nil {
			return err
		}
		return at.Put(k[:], binary.LittleEndian.AppendUint64(nil, uint64(now)))
	})
	if err != nil {
		return fmt.Errorf("progcache: bolt put %s: %w", k, err)
	}
	for _, v := range victims {
		c.removeLocked(v)
		c.stats.Evictions++
	}
	if e, ok := c.index[k]; ok {
		c.removeLocked(e)
	}
	c.index[k] = c.lru.PushFront(&boltEntry{key: k, size: size, atime: now})
	c.bytes += size
	c.stats.Puts++
	return nil
}

func (c *Bolt) removeLocked(e *list.Element) {
	be := c.lru.Remove(e).(*boltEntry)
	delete(c.index, be.key)
	delete(c.pending, be.key)
	c.bytes -= be.size
}

func (c *Bolt) deleteLocked(k Key) error {
	err := c.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketEntries).Delete(k[:]); err != nil {
			return err
		}
		return tx.Bucket(bucketATime).Delete(k[:])
	})
	if err != nil {
		return fmt.Errorf("progcache: bolt delete %s: %w", k, err)
	}
	if e, ok := c.index[k]; ok {
		c.removeLocked(e)
	}
	return nil
}

// Delete removes k; an absent key is not an error.
func (c *Bolt) Delete(ctx context.Context, k Key) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx); err != nil {
		return err
	}
	return c.deleteLocked(k)
}

// Len returns the number of entries.
func (c *Bolt) Len(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	return c.lru.Len(), nil
}

// Clear removes every entry.
func (c *Bolt) Clear(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx); err != nil {
		return err
	}
	err := c.db.Update(func(tx *bolt.Tx) error {
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
	if err != nil {
		return fmt.Errorf("progcache: bolt clear: %w", err)
	}
	c.lru.Init()
	clear(c.index)
	clear(c.pending)
	c.bytes = 0
	return nil
}

// Stats returns this cache value's counters and the current contents.
func (c *Bolt) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes, s.MaxBytes = int64(c.lru.Len()), c.bytes, c.opts.MaxBytes
	return s
}

// Close writes pending access times and closes the file, releasing the
// lock. It is idempotent.
func (c *Bolt) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var ferr error
	if len(c.pending) > 0 || c.stats != c.flushed {
		ferr = c.db.Update(func(tx *bolt.Tx) error {
			if err := c.flushLocked(tx); err != nil {
				return err
			}
			return c.flushCountersLocked(tx)
		})
	}
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("progcache: close bolt file: %w", err)
	}
	if ferr != nil {
		return fmt.Errorf("progcache: write access times: %w", ferr)
	}
	return nil
}

// Prune evicts least recently used entries until the records fit in
// maxBytes, and returns how many it evicted.
func (c *Bolt) Prune(ctx context.Context, maxBytes int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	if maxBytes < 0 {
		return 0, fmt.Errorf("progcache: prune to %d bytes: want 0 or more: %w", maxBytes, ErrInvalidConfig)
	}
	var victims []*list.Element
	bytes := c.bytes
	for e := c.lru.Back(); maxBytes > 0 && bytes > maxBytes && e != nil; e = e.Prev() {
		victims = append(victims, e)
		bytes -= e.Value.(*boltEntry).size
	}
	if len(victims) == 0 {
		return 0, nil
	}
	err := c.db.Update(func(tx *bolt.Tx) error {
		for _, v := range victims {
			vk := v.Value.(*boltEntry).key
			if err := tx.Bucket(bucketEntries).Delete(vk[:]); err != nil {
				return err
			}
			if err := tx.Bucket(bucketATime).Delete(vk[:]); err != nil {
				return err
			}
		}
		return nil
	})
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
// reported with Err set.
func (c *Bolt) Entries(ctx context.Context, verify bool) ([]EntryInfo, error) {
	c.mu.Lock()
	if err := c.enter(ctx); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	var keys []*boltEntry
	for e := c.lru.Back(); e != nil; e = e.Prev() {
		be := *e.Value.(*boltEntry)
		keys = append(keys, &be)
	}
	c.mu.Unlock()
	out := make([]EntryInfo, 0, len(keys))
	for _, be := range keys {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		var rec []byte
		if err := c.db.View(func(tx *bolt.Tx) error {
			if v := tx.Bucket(bucketEntries).Get(be.key[:]); v != nil {
				rec = append([]byte{}, v...)
			}
			return nil
		}); err != nil {
			return out, err
		}
		if rec == nil {
			continue
		}
		ei := EntryInfo{Key: be.key, Size: int64(len(rec)), Used: time.Unix(0, be.atime)}
		sk, obj, err := DecodeRecord(rec, c.opts.Record)
		if err == nil && sk != be.key {
			err = corruptf("entry stored under key %s found under %s", sk, be.key)
		}
		if err != nil {
			ei.Err = err.Error()
			ei.Unreadable = errors.Is(err, ErrUnreadable)
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
