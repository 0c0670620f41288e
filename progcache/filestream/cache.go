package filestream

// Cache: a cache directory shared by processes and hosts.
//
// Layout (directories 0700, files 0600):
//
//	dir/entries/<kk>/<key hex>   committed entry records, sharded by the
//	                             key's first byte (keys are digests, so the
//	                             names are hashed and evenly spread)
//	dir/tmp/                     records being written; same filesystem, so
//	                             the commit is one rename
//	dir/trash/                   prune victims between rename and check
//	dir/locks/<key hex>.lock     GetOrCompile's cross-process compile locks
//	dir/stats/                   counters of closed sessions (see Totals)
//	dir/aside/                   foreign things verification moved out of
//	                             the way (created only then; never swept)
//
// Readers never see a partial entry: a record is written to tmp/ and
// renamed over its name, and every record carries a checksum or MAC that
// Get verifies, so a torn or damaged file is a counted miss that is
// removed, never a wrong object. Commits do not fsync unless Sync is set.
//
// The directory is ours; nothing in it leads out. The root and each of its
// directories are held open (cacheDir) and every later path is one name
// resolved in a held directory without following links, so a link, a pipe,
// a device, or a file where a directory belongs is foreign: a miss for Get,
// an error for Put, never read, written through, swept or removed.
// Verification with fixing on moves foreign things into aside/; nothing the
// cache did not create is ever deleted.
//
// Recency is the entry's mtime: Put sets it and a hit refreshes it.
// Pruning runs when this process's running total passes the byte cap: it
// rescans the directory (entries, temp and trash files, which all take
// space), sweeps temp files older than the lease and trash files older
// than a minute, and evicts the oldest entries, each removal checked
// against a peer's replacing it.
//
// This file is the public surface (doc.go has the package's overview).
// The rest, by concern: read.go (Get and View: held descriptors,
// remembered verified files and the first-hit read), commit.go (how a
// record is written and renamed into place), scan.go (listing,
// counting and sweeping), prune.go (eviction and the
// identity-checked removal), verify.go (Entries and foreign
// things), lock.go (GetOrCompile's cross-process lock and its
// heartbeat), stats.go (counters kept across sessions), and
// dir_*.go and entry_*.go (the held directories and entry files, per
// platform).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

const (
	// DefaultTempLease is how old a temp file must be before a sweep
	// removes it: far longer than any write, so a peer's write in flight
	// is never swept.
	DefaultTempLease = time.Hour
	// DefaultLockLease is how stale a GetOrCompile lock's heartbeat must
	// be before a waiter breaks it; the holder refreshes it every
	// LockLease/4.
	DefaultLockLease = 30 * time.Second
	// DefaultMaxLockLease is the longest lease a holder's lock file is
	// honoured for, and the most clock skew a lock's future heartbeat is
	// taken for, unless MaxLockLease says otherwise.
	DefaultMaxLockLease = 10 * time.Minute
	// DefaultMaxEntryBytes bounds one entry record when neither
	// MaxEntryBytes nor MaxBytes does: Get reads at most this much of a
	// file, so a huge or sparse file at an entry's name costs an fstat,
	// not the memory to hold it.
	DefaultMaxEntryBytes = 1 << 30

	// trashLease is how old a trash file must be before a sweep removes
	// it. A trash file is already unlinked from its name; only the
	// process that moved it there looks at it, for the microseconds of an
	// identity check, so a minute is ample, and leftovers of killed
	// processes go soon.
	trashLease = time.Minute

	// recencyGranularity: a hit refreshes an entry's mtime only when it is
	// older than this. Eviction order finer than a minute is noise for a
	// cache pruned by size, and skipping the metadata write makes a
	// repeated hit a pure read.
	recencyGranularity = time.Minute

	// headerFirst: an entry file at least this large has its record
	// header read and checked first, so a large foreign or unreadable
	// file is judged without reading it whole.
	headerFirst = 1 << 20

	dirPerm  = 0o700
	filePerm = 0o600
)

// Options configure a Cache. The zero value is useful: no
// byte cap, no fsync, CRC-32C records, default leases.
type Options struct {
	// MaxBytes caps the bytes of entries, temp and trash files; 0 means no
	// cap.
	MaxBytes int64
	// MaxEntryBytes caps one entry record: Put refuses a larger one with
	// ErrTooLarge and Get does not read a larger file (a miss counted in
	// Stats.Unreadable, kept, as a peer with a larger bound may use it).
	// 0 means DefaultMaxEntryBytes; MaxBytes, when smaller, bounds it too.
	MaxEntryBytes int64
	// Sync fsyncs each committed file and its directory, for durability
	// across power loss. Without it a crash may leave a torn entry, which
	// is a counted miss.
	Sync bool
	// TempLease is the age after which temp files are swept; 0 means
	// DefaultTempLease.
	TempLease time.Duration
	// LockLease is the heartbeat age after which this process breaks a
	// GetOrCompile lock; 0 means DefaultLockLease, and a lease set must be
	// at least 1 ms (the heartbeat runs every LockLease/4). It is written
	// into the lock files this process takes, and a waiter honours the
	// lease of the holder, not its own.
	LockLease time.Duration
	// MaxLockLease bounds what a lock file can make a waiter believe: a
	// holder's lease is honoured up to MaxLockLease, and a heartbeat (the
	// lock's mtime) up to MaxLockLease in the future is taken for clock
	// skew between hosts, further for a stale lock. So a lock file that a
	// dead or hostile holder left, whatever it says, blocks its key for at
	// most twice MaxLockLease, and a sweeping open removes it once it is
	// older than the temp lease or that far in the future. 0 means
	// DefaultMaxLockLease, or LockLease if that is longer; a value set
	// must be at least LockLease.
	MaxLockLease time.Duration
	// Record selects CRC-32C (zero value) or a keyed MAC. Every process
	// sharing the directory must use the same MAC key; an entry sealed
	// otherwise is a miss counted in Stats.Unreadable and kept.
	Record progcache.RecordOptions
	// ReadOnly opens an existing cache without changing anything on disk:
	// no directories are created, nothing is swept, a hit does not
	// refresh recency, a corrupt entry is a counted miss but stays, Close
	// saves no counters, and Put, Delete, Clear, Prune and Entries with
	// verify fail with ErrReadOnly. GetOrCompile on it compiles without
	// caching.
	ReadOnly bool
	// NoCreate opens only an existing cache: the directory must exist
	// and hold entries/, or the open fails with ErrNotCache naming it and
	// creates nothing there. For tools that maintain a cache and must not
	// make one where a user pointed by mistake, like the progcache
	// command.
	NoCreate bool
	// VerifyEveryRead computes every entry's checksum on every read. By
	// default a file whose checksum passed is not checked again while its
	// identity (device, inode, size, mtime, ctime) stays the same, which
	// every write to it changes. A MAC-sealed cache skips the MAC so only
	// for files no one but this process's user can write (owned by it,
	// no group or other write bit), and verifies any other file's MAC on
	// every read.
	VerifyEveryRead bool
	// AllowSharedRoot opens a root directory that is writable by its
	// group or by everyone. Without it such a root is refused: whoever can
	// write there can plant programs for this process to load. A shared
	// root should be paired with a MACKey. Unix only; Windows has no such
	// mode bits.
	AllowSharedRoot bool
}

// minLockLease is the shortest LockLease accepted: the heartbeat runs every
// LockLease/4, and a shorter lease would only make it spin.
const minLockLease = time.Millisecond

// validate checks every field against its range; the error names the
// field, its value and what is valid.
func (o Options) validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("filestream: Options.%s %v: want %s: %w", field, v, want, progcache.ErrInvalidConfig)
	}
	switch {
	case o.MaxBytes < 0:
		return bad("MaxBytes", o.MaxBytes, "0 (no cap) or a positive byte count")
	case o.MaxEntryBytes < 0:
		return bad("MaxEntryBytes", o.MaxEntryBytes, "0 (DefaultMaxEntryBytes) or a positive byte count")
	case o.TempLease < 0:
		return bad("TempLease", o.TempLease, "0 (DefaultTempLease) or a positive duration")
	case o.LockLease < 0 || (o.LockLease > 0 && o.LockLease < minLockLease):
		return bad("LockLease", o.LockLease, fmt.Sprintf("0 (DefaultLockLease) or at least %v", minLockLease))
	case o.MaxLockLease < 0 || (o.MaxLockLease > 0 && o.MaxLockLease < max(o.LockLease, minLockLease)):
		return bad("MaxLockLease", o.MaxLockLease, fmt.Sprintf("0 (DefaultMaxLockLease) or at least LockLease (%v) and %v", o.LockLease, minLockLease))
	}
	return o.Record.Validate()
}

var (
	_ progcache.Admin         = (*Cache)(nil)
	_ progcache.Grouped       = (*Cache)(nil)
	_ progcache.Viewer        = (*Cache)(nil)
	_ progcache.ProcessLocker = (*Cache)(nil)
)

// Cache is a directory-backed cache, safe for concurrent use by many
// goroutines and many processes (and hosts on a shared filesystem).
type Cache struct {
	// Locking: life guards the open directory handles and closed: every
	// operation holds it shared while it uses a handle (enter and enterWrite
	// take it), and Close takes it exclusively to close them, so a descriptor
	// is never used after it was closed (and perhaps reused by the process for
	// another file). A method whose name ends in Locked expects life held
	// (shared, or exclusively where it says so), or runs in Open
	// before the cache is shared; no method holding life calls another that
	// takes it. pruneMu serialises this process's prunes and is taken under
	// life, never the other way round; bytes and the counters are atomics;
	// group has its own lock and is never held with life. Cross-process safety
	// comes from atomic renames and identity checks, never from in-process
	// locks.

	dir, entries, tmp, trash, locks, stats string // paths, for messages
	opts                                   Options

	life                                         sync.RWMutex
	closed                                       bool
	root, entriesD, tmpD, trashD, locksD, statsD *cacheDir // nil when absent in a read-only cache

	pruneMu sync.Mutex
	bytes   atomic.Int64 // running estimate of entries + temp + trash bytes
	count   atomic.Int64 // running estimate of entries

	hits, misses, puts, evictions, tooLarge, corrupt, unreadable atomic.Int64

	verified verifiedFiles // files whose checksum passed (read.go); own lock

	group progcache.Group // GetOrCompile's in-process deduplication; own lock
	hooks fsHooks
}

// fsHooks are test hooks; nil fields do nothing.
type fsHooks struct {
	beforeVictimRename func(path string)     // between choosing a prune (or Clear) victim and renaming it
	midWrite           func()                // after half a record is written to its temp file
	lockHeld           func()                // GetOrCompile: right after taking the file lock
	waiting            func(k progcache.Key) // GetOrCompile: a caller starts waiting for another process's lock
	lockPolled         func()                // GetOrCompile: a waiter found the lock live and will poll again
	beforeRead         func()                // read path: an entry file is open (and fstat'd unless remembered), not yet read
	checksummed        func(k progcache.Key) // read path: k's record checksum was computed
}

// Open opens (creating as needed, unless ReadOnly) the cache
// directory dir. It sweeps expired temp files and scans the entries to
// start the byte count.
func Open(dir string, opts Options) (*Cache, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.TempLease == 0 {
		opts.TempLease = DefaultTempLease
	}
	if opts.LockLease == 0 {
		opts.LockLease = DefaultLockLease
	}
	if opts.MaxLockLease == 0 {
		opts.MaxLockLease = max(DefaultMaxLockLease, opts.LockLease)
	}
	if opts.MaxEntryBytes == 0 {
		opts.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if opts.MaxBytes > 0 && opts.MaxBytes < opts.MaxEntryBytes {
		opts.MaxEntryBytes = opts.MaxBytes
	}
	c := &Cache{
		dir: dir, opts: opts,
		entries: filepath.Join(dir, "entries"), tmp: filepath.Join(dir, "tmp"),
		trash: filepath.Join(dir, "trash"), locks: filepath.Join(dir, "locks"),
		stats:    filepath.Join(dir, "stats"),
		verified: verifiedFiles{window: racyWindow, maxHeld: heldLimit(), maxHeldBytes: maxHeldBytes},
	}
	if !opts.ReadOnly && !opts.NoCreate {
		if err := os.MkdirAll(dir, dirPerm); err != nil {
			return nil, fmt.Errorf("filestream: create cache directory: %w", err)
		}
	}
	if err := c.openDirs(); err != nil {
		c.closeDirsLocked()
		return nil, err
	}
	if _, err := c.scanLocked(!opts.ReadOnly); err != nil {
		c.closeDirsLocked()
		return nil, err
	}
	return c, nil
}

// openDirs opens the root and the cache's directories, refusing a root
// that others may write and anything foreign where a directory belongs.
func (c *Cache) openDirs() error {
	root, err := openRootDir(c.dir)
	if err != nil {
		return fmt.Errorf("filestream: open cache directory: %w", err)
	}
	c.root = root
	st, err := root.stat()
	if err != nil {
		return fmt.Errorf("filestream: %w", err)
	}
	if runtime.GOOS != "windows" && st.mode.Perm()&0o022 != 0 && !c.opts.AllowSharedRoot {
		return fmt.Errorf("filestream: cache directory %s has mode %v: writable by its group or others, who could plant programs for this process to load; run chmod go-w on it, or set Options.AllowSharedRoot (with a MAC key): %w", c.dir, st.mode.Perm(), fs.ErrPermission)
	}
	create := !c.opts.ReadOnly
	if c.entriesD, err = root.subdir("entries", create && !c.opts.NoCreate); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("filestream: %s has no entries/ directory, and a read-only or NoCreate open creates nothing: %w", c.dir, progcache.ErrNotCache)
		}
		return fmt.Errorf("filestream: open cache directory: %w", err)
	}
	for _, sub := range []struct {
		name string
		d    **cacheDir
	}{{"tmp", &c.tmpD}, {"trash", &c.trashD}, {"locks", &c.locksD}, {"stats", &c.statsD}} {
		d, err := root.subdir(sub.name, create)
		if c.opts.ReadOnly && errors.Is(err, fs.ErrNotExist) {
			continue // nothing there to read
		}
		if err != nil {
			return fmt.Errorf("filestream: open cache directory: %w", err)
		}
		*sub.d = d
	}
	return nil
}

func (c *Cache) closeDirsLocked() {
	for _, d := range []**cacheDir{&c.entriesD, &c.tmpD, &c.trashD, &c.locksD, &c.statsD, &c.root} {
		(*d).close()
		*d = nil
	}
}

// Group returns the Group that GetOrCompile uses for this cache; its
// leaders also take the key's cross-process lock.
func (c *Cache) Group() *progcache.Group { return &c.group }

// Dir returns the cache directory.
func (c *Cache) Dir() string { return c.dir }

// path returns the entry file's path, for messages and tests.
func (c *Cache) path(k progcache.Key) string {
	return filepath.Join(c.entries, filepath.FromSlash(entryRel(k)))
}

// entryRel is "<kk>/<key hex>", the entry's path below entries/ (the read
// path uses makeEntryPath, which builds no string).
func entryRel(k progcache.Key) string {
	p := makeEntryPath(k)
	return string(p[:len(p)-1])
}

// enter takes life shared and checks ctx and closed; on success the caller
// must call c.life.RUnlock.
func (c *Cache) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.life.RLock()
	if c.closed {
		c.life.RUnlock()
		return fmt.Errorf("filestream: %s: %w", c.dir, progcache.ErrClosed)
	}
	return nil
}

// enterWrite is enter for an operation that changes the directory.
func (c *Cache) enterWrite(ctx context.Context, op string) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	if c.opts.ReadOnly {
		c.life.RUnlock()
		return fmt.Errorf("filestream: %s: %s: %w", c.dir, op, progcache.ErrReadOnly)
	}
	return nil
}

// Get reads and verifies the entry for k and refreshes its recency. A
// corrupt, truncated or tampered entry is a miss: it is counted and
// removed. An entry of another configuration, one over the entry bound, or
// something foreign at the entry's name is a miss counted as unreadable,
// and left alone.
func (c *Cache) Get(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	return c.get(ctx, k, true)
}

// get is Get; countMiss is false for GetOrCompile's polling, whose
// repeated looks are one miss, already counted.
func (c *Cache) get(ctx context.Context, k progcache.Key, countMiss bool) (progcache.Object, bool, error) {
	var obj progcache.Object
	ok, err := c.read(ctx, k, countMiss, false, func(v progcache.View) error {
		obj = v.ObjectSharingCode() // Code aliases the fresh buffer read made
		return nil
	})
	return obj, ok, err
}

// View lends fn the entry's record in a buffer this cache reuses (see
// Viewer): a hit allocates nothing. The record is checked as Get checks it
// (see Options.VerifyEveryRead for when its checksum is computed
// again).
func (c *Cache) View(ctx context.Context, k progcache.Key, fn func(progcache.View) error) (bool, error) {
	return c.read(ctx, k, true, true, fn)
}

// Put commits obj under k, then prunes if the byte cap is exceeded. It
// refuses to replace anything but a regular file at the entry's name.
func (c *Cache) Put(ctx context.Context, k progcache.Key, obj progcache.Object) error {
	rec, err := progcache.EncodeRecord(k, obj, c.opts.Record)
	if err != nil {
		return err
	}
	if int64(len(rec)) > c.opts.MaxEntryBytes {
		c.tooLarge.Add(1)
		return fmt.Errorf("filestream: entry of %d bytes, filestream entry cap %d bytes: %w", len(rec), c.opts.MaxEntryBytes, progcache.ErrTooLarge)
	}
	if err := c.enterWrite(ctx, "put"); err != nil {
		return err
	}
	defer c.life.RUnlock()
	rel := entryRel(k)
	sd, err := c.entriesD.subdir(rel[:2], true)
	if err != nil {
		return fmt.Errorf("filestream: put %s: %w", k, err)
	}
	defer sd.close()
	old, statErr := sd.lstat(rel[3:])
	if statErr == nil && !old.mode.IsRegular() {
		return fmt.Errorf("filestream: put %s: %w", k, foreignError(sd.join(rel[3:]), old.mode, "a regular file"))
	}
	if err := c.commitLocked(sd, rel[3:], rec); err != nil {
		return fmt.Errorf("filestream: commit entry %s: %w", k, err)
	}
	c.puts.Add(1)
	if statErr == nil {
		c.bytes.Add(-old.size)
	} else {
		c.count.Add(1)
	}
	if c.bytes.Add(int64(len(rec))) > c.opts.MaxBytes && c.opts.MaxBytes > 0 {
		if _, err := c.pruneLocked(ctx, c.opts.MaxBytes, rel); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes k's entry; an absent entry is not an error, and neither
// is something foreign at its name, which is left alone.
func (c *Cache) Delete(ctx context.Context, k progcache.Key) error {
	if err := c.enterWrite(ctx, "delete"); err != nil {
		return err
	}
	defer c.life.RUnlock()
	c.verified.forget(k) // let go of a held descriptor, so the blocks are freed
	rel := entryRel(k)
	sd, err := c.entriesD.subdir(rel[:2], false)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, progcache.ErrNotCache) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("filestream: delete entry %s: %w", k, err)
	}
	defer sd.close()
	st, err := sd.lstat(rel[3:])
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !st.mode.IsRegular()) {
		return nil
	}
	if err == nil {
		err = sd.remove(rel[3:])
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("filestream: delete entry %s: %w", k, err)
	}
	c.bytes.Add(-st.size)
	c.count.Add(-1)
	return nil
}

// Len counts the entries on disk.
func (c *Cache) Len(ctx context.Context) (int, error) {
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	defer c.life.RUnlock()
	es, err := c.listLocked(ctx)
	n := 0
	for _, e := range es {
		if e.foreign == "" {
			n++
		}
	}
	return n, err
}

// Clear removes every entry (temp files of writers in flight are left).
// Each removal is identity-checked like a prune's, so an entry a peer
// committed after the listing survives.
func (c *Cache) Clear(ctx context.Context) error {
	if err := c.enterWrite(ctx, "clear"); err != nil {
		return err
	}
	defer c.life.RUnlock()
	es, err := c.listLocked(ctx)
	if err != nil {
		return err
	}
	for _, e := range es {
		if e.foreign != "" {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.hooks.beforeVictimRename != nil {
			c.hooks.beforeVictimRename(c.path(e.key))
		}
		c.verified.forget(e.key)
		if _, err := c.removeEntryLocked(e.shard, e.name, e.st); err != nil {
			return fmt.Errorf("filestream: clear: %w", err)
		}
	}
	_, err = c.scanLocked(false)
	return err
}

// Stats returns this process's counters and the last known contents.
func (c *Cache) Stats() progcache.Stats {
	s := c.sessionCounters()
	s.Entries, s.Bytes, s.MaxBytes = c.count.Load(), c.bytes.Load(), c.opts.MaxBytes
	return s
}

func (c *Cache) sessionCounters() progcache.Stats {
	return progcache.Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Puts: c.puts.Load(),
		Evictions: c.evictions.Load(), TooLarge: c.tooLarge.Load(), Corrupt: c.corrupt.Load(),
		Unreadable: c.unreadable.Load()}
}

// Close saves this session's counters (unless read-only) and closes the
// directory handles, after any operation in flight. Files stay on disk.
func (c *Cache) Close() error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if !c.opts.ReadOnly {
		err = c.saveCountersLocked()
	}
	c.verified.forgetAll()
	c.closeDirsLocked()
	return err
}
