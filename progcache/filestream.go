package progcache

// FileStream: a cache directory shared by processes and hosts.
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
// than a minute, and evicts the oldest entries. A victim is renamed into
// trash/ and its identity (device, inode, size, mtime) is compared with the
// one chosen; if a peer replaced the entry in between, the newer file is
// linked back to its name (unless an even newer one is there) instead of
// being deleted, and if a peer removed it first, its bytes are gone all
// the same and count as freed.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelkit/accelkit/progcache/internal/fsmode"
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

// FileStreamOptions configure a FileStream. The zero value is useful: no
// byte cap, no fsync, CRC-32C records, default leases.
type FileStreamOptions struct {
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
	// Record selects CRC-32C (zero value) or a keyed MAC. Every process
	// sharing the directory must use the same MAC key; an entry sealed
	// otherwise is a miss counted in Stats.Unreadable and kept.
	Record RecordOptions
	// ReadOnly opens an existing cache without changing anything on disk:
	// no directories are created, nothing is swept, a hit does not
	// refresh recency, a corrupt entry is a counted miss but stays, Close
	// saves no counters, and Put, Delete, Clear, Prune and Entries with
	// verify fail with ErrReadOnly. GetOrCompile on it compiles without
	// caching.
	ReadOnly bool
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
func (o FileStreamOptions) validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("progcache: FileStreamOptions.%s %v: want %s: %w", field, v, want, ErrInvalidConfig)
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
	}
	return o.Record.Validate()
}

var _ Admin = (*FileStream)(nil)

// FileStream is a directory-backed cache, safe for concurrent use by many
// goroutines and many processes (and hosts on a shared filesystem).
//
// Locking: life guards the open directory handles and closed: every
// operation holds it shared while it uses a handle, and Close takes it
// exclusively to close them, so a descriptor is never used after it was
// closed (and perhaps reused by the process for another file). No method
// holding life calls another that takes it. pruneMu serialises this
// process's prunes; bytes and the counters are atomics. Cross-process
// safety comes from atomic renames and identity checks, never from
// in-process locks.
type FileStream struct {
	dir, entries, tmp, trash, locks, stats string // paths, for messages
	opts                                   FileStreamOptions

	life                                         sync.RWMutex
	closed                                       bool
	root, entriesD, tmpD, trashD, locksD, statsD *cacheDir // nil when absent in a read-only cache

	pruneMu sync.Mutex
	bytes   atomic.Int64 // running estimate of entries + temp + trash bytes
	count   atomic.Int64 // running estimate of entries

	hits, misses, puts, evictions, tooLarge, corrupt, unreadable atomic.Int64

	group Group // GetOrCompile's in-process deduplication; own lock
	hooks fsHooks
}

// fsHooks are test hooks; nil fields do nothing.
type fsHooks struct {
	beforeVictimRename func(path string) // between choosing a prune (or Clear) victim and renaming it
	midWrite           func()            // after half a record is written to its temp file
	lockHeld           func()            // GetOrCompile: right after taking the file lock
	waiting            func(k Key)       // GetOrCompile: a caller starts waiting for another process's lock
	lockPolled         func()            // GetOrCompile: a waiter found the lock live and will poll again
}

// OpenFileStream opens (creating as needed, unless ReadOnly) the cache
// directory dir. It sweeps expired temp files and scans the entries to
// start the byte count.
func OpenFileStream(dir string, opts FileStreamOptions) (*FileStream, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.TempLease == 0 {
		opts.TempLease = DefaultTempLease
	}
	if opts.LockLease == 0 {
		opts.LockLease = DefaultLockLease
	}
	if opts.MaxEntryBytes == 0 {
		opts.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if opts.MaxBytes > 0 && opts.MaxBytes < opts.MaxEntryBytes {
		opts.MaxEntryBytes = opts.MaxBytes
	}
	c := &FileStream{
		dir: dir, opts: opts,
		entries: filepath.Join(dir, "entries"), tmp: filepath.Join(dir, "tmp"),
		trash: filepath.Join(dir, "trash"), locks: filepath.Join(dir, "locks"),
		stats: filepath.Join(dir, "stats"),
	}
	if !opts.ReadOnly {
		if err := os.MkdirAll(dir, dirPerm); err != nil {
			return nil, fmt.Errorf("progcache: create cache directory: %w", err)
		}
	}
	if err := c.openDirs(); err != nil {
		c.closeDirs()
		return nil, err
	}
	if _, err := c.scan(!opts.ReadOnly); err != nil {
		c.closeDirs()
		return nil, err
	}
	return c, nil
}

// openDirs opens the root and the cache's directories, refusing a root
// that others may write and anything foreign where a directory belongs.
func (c *FileStream) openDirs() error {
	root, err := openRootDir(c.dir)
	if err != nil {
		return fmt.Errorf("progcache: open cache directory: %w", err)
	}
	c.root = root
	st, err := root.stat()
	if err != nil {
		return fmt.Errorf("progcache: %w", err)
	}
	if runtime.GOOS != "windows" && st.mode.Perm()&0o022 != 0 && !c.opts.AllowSharedRoot {
		return fmt.Errorf("progcache: cache directory %s has mode %v: writable by its group or others, who could plant programs for this process to load; run chmod go-w on it, or set FileStreamOptions.AllowSharedRoot (with a MAC key): %w", c.dir, st.mode.Perm(), fs.ErrPermission)
	}
	create := !c.opts.ReadOnly
	if c.entriesD, err = root.subdir("entries", create); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("progcache: %s has no entries/ directory: not a progcache cache (a read-only open creates nothing): %w", c.dir, ErrNotCache)
		}
		return fmt.Errorf("progcache: open cache directory: %w", err)
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
			return fmt.Errorf("progcache: open cache directory: %w", err)
		}
		*sub.d = d
	}
	return nil
}

func (c *FileStream) closeDirs() {
	for _, d := range []**cacheDir{&c.entriesD, &c.tmpD, &c.trashD, &c.locksD, &c.statsD, &c.root} {
		(*d).close()
		*d = nil
	}
}

// Group returns the Group that GetOrCompile uses for this cache; its
// leaders also take the key's cross-process lock.
func (c *FileStream) Group() *Group { return &c.group }

// Dir returns the cache directory.
func (c *FileStream) Dir() string { return c.dir }

// path returns the entry file's path, for messages and tests.
func (c *FileStream) path(k Key) string {
	return filepath.Join(c.entries, filepath.FromSlash(entryRel(k)))
}

// entryRel is "<kk>/<key hex>", the entry's path below entries/, built
// with one allocation, as every Get needs it.
func entryRel(k Key) string {
	var b [3 + 2*KeySize]byte
	hex.Encode(b[3:], k[:])
	b[0], b[1], b[2] = b[3], b[4], '/'
	return string(b[:])
}

// enter takes life shared and checks ctx and closed; on success the caller
// must call c.life.RUnlock.
func (c *FileStream) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.life.RLock()
	if c.closed {
		c.life.RUnlock()
		return fmt.Errorf("progcache: filestream %s: %w", c.dir, ErrClosed)
	}
	return nil
}

// enterWrite is enter for an operation that changes the directory.
func (c *FileStream) enterWrite(ctx context.Context, op string) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	if c.opts.ReadOnly {
		c.life.RUnlock()
		return fmt.Errorf("progcache: filestream %s: %s: %w", c.dir, op, ErrReadOnly)
	}
	return nil
}

// Get reads and verifies the entry for k and refreshes its recency. A
// corrupt, truncated or tampered entry is a miss: it is counted and
// removed. An entry of another configuration, one over the entry bound, or
// something foreign at the entry's name is a miss counted as unreadable,
// and left alone.
func (c *FileStream) Get(ctx context.Context, k Key) (Object, bool, error) {
	return c.get(ctx, k, true)
}

// get is Get; countMiss is false for GetOrCompile's polling, whose
// repeated looks are one miss, already counted.
func (c *FileStream) get(ctx context.Context, k Key, countMiss bool) (Object, bool, error) {
	if err := c.enter(ctx); err != nil {
		return Object{}, false, err
	}
	defer c.life.RUnlock()
	rel := entryRel(k)
	e, err := c.entriesD.openEntry(rel[:2], rel[3:])
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if countMiss {
			c.misses.Add(1)
		}
		return Object{}, false, nil
	case errors.Is(err, ErrNotCache):
		c.unreadable.Add(1)
		c.misses.Add(1)
		return Object{}, false, nil
	case err != nil:
		return Object{}, false, fmt.Errorf("progcache: read entry %s: %w", k, err)
	}
	defer e.close()
	sk, obj, err := c.readRecord(ctx, &e)
	if err == nil && sk != k {
		err = corruptf("entry stored under key %s found under %s", sk, k)
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrUnreadable):
		c.unreadable.Add(1)
		c.misses.Add(1)
		return Object{}, false, nil
	case errors.Is(err, ErrCorrupt):
		c.corrupt.Add(1)
		c.misses.Add(1)
		if !c.opts.ReadOnly {
			// Best effort: the Get is a miss either way, and an entry
			// left behind is found corrupt and removed again later.
			_, _ = c.removeEntry(rel[:2], rel[3:], e.st)
		}
		return Object{}, false, nil
	default:
		return Object{}, false, fmt.Errorf("progcache: read entry %s: %w", k, err)
	}
	if now := time.Now(); !c.opts.ReadOnly && now.Sub(e.st.mtime) > recencyGranularity {
		_ = e.touch(now) // best effort: recency only orders eviction
	}
	c.hits.Add(1)
	return obj, true, nil
}

// readRecord reads and decodes an open entry file, within the entry bound.
// An error is ErrCorrupt, ErrUnreadable, or an I/O or context error.
func (c *FileStream) readRecord(ctx context.Context, e *entryFile) (Key, Object, error) {
	if e.st.size > c.opts.MaxEntryBytes {
		return Key{}, Object{}, unreadablef("entry file of %d bytes is over this cache's entry bound of %d bytes", e.st.size, c.opts.MaxEntryBytes)
	}
	if e.st.size >= headerFirst {
		h, err := e.read(ctx, recordHeaderSize)
		if err != nil {
			return Key{}, Object{}, err
		}
		if err := checkRecordHeader(h, c.opts.Record); err != nil {
			return Key{}, Object{}, err
		}
	}
	b, err := e.read(ctx, e.st.size)
	if err != nil {
		return Key{}, Object{}, err
	}
	return DecodeRecord(b, c.opts.Record)
}

// Put commits obj under k, then prunes if the byte cap is exceeded. It
// refuses to replace anything but a regular file at the entry's name.
func (c *FileStream) Put(ctx context.Context, k Key, obj Object) error {
	rec, err := EncodeRecord(k, obj, c.opts.Record)
	if err != nil {
		return err
	}
	if int64(len(rec)) > c.opts.MaxEntryBytes {
		c.tooLarge.Add(1)
		return fmt.Errorf("progcache: entry of %d bytes, filestream entry cap %d bytes: %w", len(rec), c.opts.MaxEntryBytes, ErrTooLarge)
	}
	if err := c.enterWrite(ctx, "put"); err != nil {
		return err
	}
	defer c.life.RUnlock()
	rel := entryRel(k)
	sd, err := c.entriesD.subdir(rel[:2], true)
	if err != nil {
		return fmt.Errorf("progcache: put %s: %w", k, err)
	}
	defer sd.close()
	old, statErr := sd.lstat(rel[3:])
	if statErr == nil && !old.mode.IsRegular() {
		return fmt.Errorf("progcache: put %s: %w", k, foreignError(sd.join(rel[3:]), old.mode, "a regular file"))
	}
	if err := c.commit(sd, rel[3:], rec); err != nil {
		return fmt.Errorf("progcache: commit entry %s: %w", k, err)
	}
	c.puts.Add(1)
	if statErr == nil {
		c.bytes.Add(-old.size)
	} else {
		c.count.Add(1)
	}
	if c.bytes.Add(int64(len(rec))) > c.opts.MaxBytes && c.opts.MaxBytes > 0 {
		if _, err := c.prune(ctx, c.opts.MaxBytes, rel); err != nil {
			return err
		}
	}
	return nil
}

var tmpSeq atomic.Uint64

// tmpName is unique across processes and hosts sharing the directory.
func tmpName() string {
	return ".entry-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(tmpSeq.Add(1), 10) + "-" + strconv.FormatUint(rand.Uint64(), 36)
}

// commit writes rec to a new file in tmp/ and renames it over name in the
// shard directory sd. With Sync the file is fsynced before the rename and
// the shard directory after it. Without Sync nothing is fsynced: that is
// the whole cost of cuda.core's put, and records are checksummed, so a
// torn file after a crash is a counted miss. (renameio does the same dance
// on path names; here every step is relative to a held directory, so no
// path component can be swapped for a link in between.)
func (c *FileStream) commit(sd *cacheDir, name string, rec []byte) error {
	tn := tmpName()
	f, err := c.tmpD.create(tn)
	if err != nil {
		return err
	}
	err = c.writeRecord(f, rec)
	if err == nil && c.opts.Sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = renameRetrying(func() error { return c.tmpD.rename(tn, sd, name) })
	}
	if err != nil {
		_ = c.tmpD.remove(tn) // err is what counts; scan sweeps a leftover past TempLease
		return err
	}
	if c.opts.Sync {
		return sd.sync()
	}
	return nil
}

// writeRecord writes rec to f, calling the midWrite hook half way.
func (c *FileStream) writeRecord(f io.Writer, rec []byte) error {
	half := len(rec) / 2
	if _, err := f.Write(rec[:half]); err != nil {
		return err
	}
	if c.hooks.midWrite != nil {
		c.hooks.midWrite()
	}
	_, err := f.Write(rec[half:])
	return err
}

// Delete removes k's entry; an absent entry is not an error, and neither
// is something foreign at its name, which is left alone.
func (c *FileStream) Delete(ctx context.Context, k Key) error {
	if err := c.enterWrite(ctx, "delete"); err != nil {
		return err
	}
	defer c.life.RUnlock()
	rel := entryRel(k)
	sd, err := c.entriesD.subdir(rel[:2], false)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotCache) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("progcache: delete entry %s: %w", k, err)
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
		return fmt.Errorf("progcache: delete entry %s: %w", k, err)
	}
	c.bytes.Add(-st.size)
	c.count.Add(-1)
	return nil
}

// Len counts the entries on disk.
func (c *FileStream) Len(ctx context.Context) (int, error) {
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	defer c.life.RUnlock()
	es, err := c.list(ctx)
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
func (c *FileStream) Clear(ctx context.Context) error {
	if err := c.enterWrite(ctx, "clear"); err != nil {
		return err
	}
	defer c.life.RUnlock()
	es, err := c.list(ctx)
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
		if _, err := c.removeEntry(e.shard, e.name, e.st); err != nil {
			return fmt.Errorf("progcache: clear: %w", err)
		}
	}
	_, err = c.scan(false)
	return err
}

// Stats returns this process's counters and the last known contents.
func (c *FileStream) Stats() Stats {
	s := c.sessionCounters()
	s.Entries, s.Bytes, s.MaxBytes = c.count.Load(), c.bytes.Load(), c.opts.MaxBytes
	return s
}

func (c *FileStream) sessionCounters() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Puts: c.puts.Load(),
		Evictions: c.evictions.Load(), TooLarge: c.tooLarge.Load(), Corrupt: c.corrupt.Load(),
		Unreadable: c.unreadable.Load()}
}

// Close saves this session's counters (unless read-only) and closes the
// directory handles, after any operation in flight. Files stay on disk.
func (c *FileStream) Close() error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if !c.opts.ReadOnly {
		err = c.saveCounters()
	}
	c.closeDirs()
	return err
}

// fileEntry is one thing found in entries/ by a listing: a committed entry
// (foreign empty) or something foreign where the cache keeps its own.
type fileEntry struct {
	key         Key
	shard, name string // name is "" for a foreign thing in place of a shard
	st          fileStat
	foreign     string // what is wrong, for a foreign thing
}

func (e fileEntry) rel() string {
	if e.name == "" {
		return e.shard
	}
	return e.shard + "/" + e.name
}

// isShardName reports whether n names a shard: two lowercase hex digits.
func isShardName(n string) bool {
	return len(n) == 2 && strings.Trim(n, "0123456789abcdef") == ""
}

// list lists entries/: every committed entry, and every foreign thing
// where the cache keeps shard directories or entry files (a non-directory
// or link at a shard's name, a non-regular file or a file not named by a
// key of its shard). It follows no link. The caller holds life.
func (c *FileStream) list(ctx context.Context) ([]fileEntry, error) {
	shards, err := c.entriesD.names()
	if err != nil {
		return nil, fmt.Errorf("progcache: scan %s: %w", c.entries, err)
	}
	slices.Sort(shards)
	var out []fileEntry
	for _, sh := range shards {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st, err := c.entriesD.lstat(sh)
		if err != nil {
			continue // removed by a peer
		}
		if !isShardName(sh) || !st.mode.IsDir() {
			out = append(out, fileEntry{shard: sh, st: st, foreign: foreignError(c.entriesD.join(sh), st.mode, "a shard directory named by two hex digits").Error()})
			continue
		}
		sd, err := c.entriesD.subdir(sh, false)
		if err != nil {
			continue // replaced or removed by a peer since the lstat
		}
		names, err := sd.names()
		if err != nil {
			sd.close()
			continue
		}
		for _, n := range names {
			st, err := sd.lstat(n)
			if err != nil {
				continue
			}
			e := fileEntry{shard: sh, name: n, st: st}
			k, kerr := ParseKey(n)
			switch {
			case !st.mode.IsRegular():
				e.foreign = foreignError(sd.join(n), st.mode, "a regular entry file").Error()
			case kerr != nil || k.String() != n || !strings.HasPrefix(n, sh):
				e.foreign = fmt.Sprintf("progcache: %s is not named by a key of shard %s: not a cache entry", sd.join(n), sh)
			default:
				e.key = k
			}
			out = append(out, e)
		}
		sd.close()
	}
	return out, nil
}

// scan recomputes the byte and entry counts (entries plus temp and trash
// files) and, when sweep is set, sweeps temp files older than the lease,
// trash files older than trashLease, stale locks and counter-file
// leftovers. It returns the entries found. The caller holds life, or is
// OpenFileStream.
func (c *FileStream) scan(sweep bool) ([]fileEntry, error) {
	es, err := c.list(context.Background())
	if err != nil {
		return nil, err
	}
	var total, n int64
	for _, e := range es {
		if e.foreign == "" {
			total += e.st.size
			n++
		}
	}
	total += c.sweepDir(c.tmpD, sweep, c.opts.TempLease, func(string) bool { return true })
	total += c.sweepDir(c.trashD, sweep, trashLease, func(string) bool { return true })
	if sweep {
		c.sweepDir(c.statsD, true, c.opts.TempLease, func(n string) bool { return strings.HasPrefix(n, ".") })
		c.sweepLocks()
	}
	c.bytes.Store(total)
	c.count.Store(n)
	return es, nil
}

// sweepDir removes the regular files of d older than lease whose names
// match (when sweep is set) and returns the bytes of the regular files
// left. Anything else in d (a link, a directory) is not the cache's: it is
// neither counted nor removed.
func (c *FileStream) sweepDir(d *cacheDir, sweep bool, lease time.Duration, match func(string) bool) int64 {
	if d == nil {
		return 0
	}
	names, _ := d.names()
	var total int64
	deadline := time.Now().Add(-lease)
	for _, n := range names {
		st, err := d.lstat(n)
		if err != nil || !st.mode.IsRegular() {
			continue
		}
		if sweep && match(n) && st.mtime.Before(deadline) {
			if d.remove(n) == nil {
				continue
			}
		}
		total += st.size
	}
	return total
}

// Prune evicts least recently used entries until entries plus temp and
// trash files fit in maxBytes (0: only sweep), and returns how many
// entries it evicted. It is what Put runs when the cap is passed; the CLI
// runs it with --max-size.
func (c *FileStream) Prune(ctx context.Context, maxBytes int64) (int, error) {
	if maxBytes < 0 {
		return 0, fmt.Errorf("progcache: prune to %d bytes: want 0 or more: %w", maxBytes, ErrInvalidConfig)
	}
	if err := c.enterWrite(ctx, "prune"); err != nil {
		return 0, err
	}
	defer c.life.RUnlock()
	return c.prune(ctx, maxBytes, "")
}

// prune is Prune; keep is the entryRel of an entry that must not be
// chosen (the entry the calling Put just committed). The caller holds
// life.
func (c *FileStream) prune(ctx context.Context, maxBytes int64, keep string) (int, error) {
	c.pruneMu.Lock()
	defer c.pruneMu.Unlock()
	es, err := c.scan(true)
	if err != nil {
		return 0, err
	}
	total := c.bytes.Load()
	if maxBytes == 0 || total <= maxBytes {
		return 0, nil
	}
	es = slices.DeleteFunc(es, func(e fileEntry) bool { return e.foreign != "" })
	slices.SortFunc(es, func(a, b fileEntry) int { return a.st.mtime.Compare(b.st.mtime) })
	evicted := 0
	for _, e := range es {
		if total <= maxBytes {
			break
		}
		if e.rel() == keep {
			continue
		}
		if err := ctx.Err(); err != nil {
			return evicted, err
		}
		if c.hooks.beforeVictimRename != nil {
			c.hooks.beforeVictimRename(c.path(e.key))
		}
		res, _ := c.removeEntry(e.shard, e.name, e.st)
		switch res.outcome {
		case removed:
			evicted++
			c.evictions.Add(1)
			c.count.Add(-1)
			total -= e.st.size
		case gone:
			// A peer removed it first: its bytes are freed all the same.
			c.count.Add(-1)
			total -= e.st.size
		case replaced:
			// A peer's newer entry took the name back: that is what
			// occupies the space now.
			total += res.size - e.st.size
		}
	}
	c.bytes.Store(total)
	return evicted, nil
}

type outcome int

const (
	removed  outcome = iota // the chosen file was removed
	gone                    // it was already gone (a peer removed it)
	replaced                // a peer's newer file holds the name; it was kept
	kept                    // it could not be moved (an error); nothing changed
)

type removal struct {
	outcome outcome
	size    int64 // for replaced: the newer file's size
}

var trashSeq atomic.Uint64

// removeEntry removes entries/shard/name if it is still the file chosen.
// The caller holds life.
func (c *FileStream) removeEntry(shard, name string, chosen fileStat) (removal, error) {
	sd, err := c.entriesD.subdir(shard, false)
	if errors.Is(err, fs.ErrNotExist) {
		return removal{outcome: gone}, nil
	}
	if err != nil {
		return removal{outcome: kept}, err
	}
	defer sd.close()
	return c.removeIfSame(sd, name, chosen)
}

// removeIfSame removes name in d only if it is still the file chosen
// (same identity, size and mtime). It renames the file into trash/ first,
// so the comparison and the removal see one file; a mismatch means a peer
// replaced it after it was chosen, and that newer file is linked back to
// its name unless an even newer one has taken the name already. The
// caller holds life.
func (c *FileStream) removeIfSame(d *cacheDir, name string, chosen fileStat) (removal, error) {
	t := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(trashSeq.Add(1), 10) + "-" + name
	if err := d.rename(name, c.trashD, t); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return removal{outcome: gone}, nil
		}
		return removal{outcome: kept}, err
	}
	st, err := c.trashD.lstat(t)
	// A trash file left by a failed remove is swept by the next scan once
	// older than trashLease.
	if err == nil && st.same(chosen) {
		_ = c.trashD.remove(t)
		return removal{outcome: removed}, nil
	}
	// Not the file chosen: a peer committed a newer one. Put it back
	// unless a newer one still has taken the name (the link fails then).
	res := removal{outcome: gone}
	if err == nil && c.trashD.link(t, d, name) == nil {
		res = removal{outcome: replaced, size: st.size}
	}
	_ = c.trashD.remove(t)
	return res, nil
}

// Entries lists the entries, least recently used first, reading each to
// report its kind and name, and the foreign things in entries/. With
// verify set, corrupt entries are removed and counted (as Get would) and
// foreign things are moved to aside/; entries of another configuration are
// reported and kept. Without verify nothing changes.
func (c *FileStream) Entries(ctx context.Context, verify bool) ([]EntryInfo, error) {
	var err error
	if verify {
		err = c.enterWrite(ctx, "verify with fixing")
	} else {
		err = c.enter(ctx)
	}
	if err != nil {
		return nil, err
	}
	defer c.life.RUnlock()
	all, err := c.list(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(all, func(a, b fileEntry) int { return a.st.mtime.Compare(b.st.mtime) })
	out := make([]EntryInfo, 0, len(all))
	for _, e := range all {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		ei := EntryInfo{Key: e.key, Size: e.st.size, Used: e.st.mtime}
		if e.foreign != "" {
			ei.Foreign, ei.Path, ei.Err = true, filepath.Join("entries", filepath.FromSlash(e.rel())), e.foreign
			if verify {
				to, err := c.moveAside(e)
				if err != nil {
					return out, err
				}
				ei.MovedTo = to
			}
			out = append(out, ei)
			continue
		}
		f, err := c.entriesD.openEntry(e.shard, e.name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a peer
		}
		var sk Key
		var obj Object
		if err == nil {
			sk, obj, err = c.readRecord(ctx, &f)
			f.close()
		}
		if err == nil && sk != e.key {
			err = corruptf("file %s holds an entry for key %s", e.name, sk)
		}
		switch {
		case err == nil:
			ei.Kind, ei.Name, ei.CodeLen = obj.Kind, obj.Name, len(obj.Code)
		case errors.Is(err, ErrUnreadable), errors.Is(err, ErrNotCache):
			ei.Err, ei.Unreadable = err.Error(), true
		case errors.Is(err, ErrCorrupt):
			ei.Err = err.Error()
			if verify {
				if res, _ := c.removeEntry(e.shard, e.name, f.st); res.outcome == removed {
					c.corrupt.Add(1)
				}
			}
		default:
			return out, err
		}
		out = append(out, ei)
	}
	return out, nil
}

// moveAside renames a foreign thing in entries/ into aside/, keeping it
// whole (a link is moved, not followed), and returns its new path.
func (c *FileStream) moveAside(e fileEntry) (string, error) {
	aside, err := c.root.subdir("aside", true)
	if err != nil {
		return "", fmt.Errorf("progcache: set aside %s: %w", e.rel(), err)
	}
	defer aside.close()
	to := strings.ReplaceAll(e.rel(), "/", "-") + "." + strconv.FormatInt(time.Now().UnixNano(), 10)
	from, name := c.entriesD, e.shard
	if e.name != "" {
		sd, err := c.entriesD.subdir(e.shard, false)
		if err != nil {
			return "", fmt.Errorf("progcache: set aside %s: %w", e.rel(), err)
		}
		defer sd.close()
		from, name = sd, e.name
	}
	if err := from.rename(name, aside, to); err != nil {
		return "", fmt.Errorf("progcache: set aside %s: %w", e.rel(), err)
	}
	return filepath.Join(c.dir, "aside", to), nil
}

// foreignError says what was found where the cache keeps want.
func foreignError(path string, mode fs.FileMode, want string) error {
	return fmt.Errorf("progcache: %s is %s, where the cache keeps %s; it is left alone (progcache verify --fix moves it to aside/): %w", path, fsmode.Describe(mode), want, ErrNotCache)
}
