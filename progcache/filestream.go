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
//
// Readers never see a partial entry: a record is written to tmp/ and
// renamed over its name (renameio), and every record carries a checksum or
// MAC that Get verifies, so a torn or foreign file is a counted miss that is
// removed, never a wrong object. Commits do not fsync unless Sync is set.
//
// Recency is the entry's mtime: Put sets it and a hit refreshes it.
// Pruning runs when this process's running total passes the byte cap: it
// rescans the directory (entries plus temp files, which count toward the
// cap), sweeps temp and trash files older than the lease, and evicts the
// oldest entries. A victim is renamed into trash/ and its identity (file
// identity, size, mtime) is compared with the one chosen; if a peer
// replaced the entry in between, the newer file is linked back to its name
// (unless an even newer one is there) instead of being deleted.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultTempLease is how old a temp or trash file must be before a
	// sweep removes it: far longer than any write, so a peer's write in
	// flight is never swept.
	DefaultTempLease = time.Hour
	// DefaultLockLease is how stale a GetOrCompile lock's heartbeat must
	// be before a waiter breaks it; the holder refreshes it every
	// LockLease/4.
	DefaultLockLease = 30 * time.Second
	// maxRecordRead bounds how much Get reads of one file, so a huge
	// foreign file cannot exhaust memory (entries over it are corrupt).
	maxRecordRead = 1 << 34

	// recencyGranularity: a hit refreshes an entry's mtime only when it is
	// older than this. Eviction order finer than a minute is noise for a
	// cache pruned by size, and skipping the metadata write makes a
	// repeated hit a pure read.
	recencyGranularity = time.Minute

	dirPerm  = 0o700
	filePerm = 0o600
)

// FileStreamOptions configure a FileStream. The zero value is useful: no
// byte cap, no fsync, CRC-32C records, default leases.
type FileStreamOptions struct {
	// MaxBytes caps the bytes of entries and temp files; 0 means no cap.
	MaxBytes int64
	// Sync fsyncs each committed file and its directory, for durability
	// across power loss. Without it a crash may leave a torn entry, which
	// is a counted miss.
	Sync bool
	// TempLease is the age after which temp and trash files are swept;
	// 0 means DefaultTempLease.
	TempLease time.Duration
	// LockLease is the heartbeat age after which a GetOrCompile lock is
	// broken; 0 means DefaultLockLease.
	LockLease time.Duration
	// Record selects CRC-32C (zero value) or a keyed MAC. Every process
	// sharing the directory must use the same MAC key; entries written
	// without it are rejected.
	Record RecordOptions
}

// FileStream is a directory-backed cache, safe for concurrent use by many
// goroutines and many processes (and hosts on a shared filesystem).
//
// Locking: pruneMu serialises this process's prunes; bytes and the stats
// counters are atomics. Cross-process safety comes from atomic renames and
// identity checks, never from in-process locks.
type FileStream struct {
	dir, entries, tmp, trash, locks, stats string
	opts                                   FileStreamOptions

	pruneMu sync.Mutex
	bytes   atomic.Int64 // running estimate of entries + temp bytes
	count   atomic.Int64 // running estimate of entries
	closed  atomic.Bool

	hits, misses, puts, evictions, tooLarge, corrupt, unreadable atomic.Int64

	flight flightGroup
	hooks  fsHooks
}

// fsHooks are test hooks; nil fields do nothing.
type fsHooks struct {
	beforeVictimRename func(path string) // between choosing a prune victim and renaming it
	midWrite           func()            // after half a record is written to its temp file
	lockHeld           func()            // GetOrCompile: right after taking the file lock
	waiting            func(k Key)       // GetOrCompile: a caller starts waiting for another process's lock
	lockPolled         func()            // GetOrCompile: a waiter found the lock live and will poll again
}

// OpenFileStream opens (creating as needed) the cache directory dir. It
// sweeps expired temp files and scans the entries to start the byte count.
func OpenFileStream(dir string, opts FileStreamOptions) (*FileStream, error) {
	if opts.MaxBytes < 0 {
		return nil, fmt.Errorf("progcache: filestream byte cap %d: must be 0 (no cap) or positive: %w", opts.MaxBytes, ErrInvalidConfig)
	}
	if opts.TempLease < 0 || opts.LockLease < 0 {
		return nil, fmt.Errorf("progcache: filestream leases must not be negative: %w", ErrInvalidConfig)
	}
	if err := opts.Record.validate(); err != nil {
		return nil, err
	}
	if opts.TempLease == 0 {
		opts.TempLease = DefaultTempLease
	}
	if opts.LockLease == 0 {
		opts.LockLease = DefaultLockLease
	}
	c := &FileStream{
		dir: dir, opts: opts,
		entries: filepath.Join(dir, "entries"), tmp: filepath.Join(dir, "tmp"),
		trash: filepath.Join(dir, "trash"), locks: filepath.Join(dir, "locks"),
		stats: filepath.Join(dir, "stats"),
	}
	for _, d := range []string{c.entries, c.tmp, c.trash, c.locks, c.stats} {
		if err := os.MkdirAll(d, dirPerm); err != nil {
			return nil, fmt.Errorf("progcache: create cache directory: %w", err)
		}
	}
	if _, err := c.scan(true); err != nil {
		return nil, err
	}
	return c, nil
}

// Dir returns the cache directory.
func (c *FileStream) Dir() string { return c.dir }

// path is filepath.Join(c.entries, h[:2], h) for h the key's hex, built
// with one allocation (c.entries is already clean), as every Get calls it.
func (c *FileStream) path(k Key) string {
	var h [2 * KeySize]byte
	hex.Encode(h[:], k[:])
	const sep = string(filepath.Separator)
	return c.entries + sep + string(h[:2]) + sep + string(h[:])
}

func (c *FileStream) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.closed.Load() {
		return fmt.Errorf("progcache: filestream %s: %w", c.dir, ErrClosed)
	}
	return nil
}

// Get reads and verifies the entry for k and refreshes its recency. A
// corrupt, truncated, foreign or tampered entry is a miss: it is counted
// and removed.
func (c *FileStream) Get(ctx context.Context, k Key) (Object, bool, error) {
	return c.get(ctx, k, true)
}

// get is Get; countMiss is false for GetOrCompile's polling, whose
// repeated looks are one miss, already counted.
func (c *FileStream) get(ctx context.Context, k Key, countMiss bool) (Object, bool, error) {
	if err := c.enter(ctx); err != nil {
		return Object{}, false, err
	}
	p := c.path(k)
	b, st, err := readEntry(p)
	if errors.Is(err, fs.ErrNotExist) {
		if countMiss {
			c.misses.Add(1)
		}
		return Object{}, false, nil
	}
	if err != nil {
		return Object{}, false, fmt.Errorf("progcache: read entry %s: %w", k, err)
	}
	sk, obj, err := DecodeRecord(b, c.opts.Record)
	if err == nil && sk != k {
		err = corruptf("entry stored under key %s found under %s", sk, k)
	}
	if errors.Is(err, ErrUnreadable) {
		// Written by a differently configured peer: keep it.
		c.unreadable.Add(1)
		c.misses.Add(1)
		return Object{}, false, nil
	}
	if err != nil {
		c.corrupt.Add(1)
		c.misses.Add(1)
		if c.removeIfSame(p, st.info()) {
			c.bytes.Add(-st.size())
			c.count.Add(-1)
		}
		return Object{}, false, nil
	}
	if now := time.Now(); now.Sub(st.modTime()) > recencyGranularity {
		_ = os.Chtimes(p, now, now) // a peer may have replaced or pruned it, which is fine
	}
	c.hits.Add(1)
	return obj, true, nil
}

// Put commits obj under k, then prunes if the byte cap is exceeded.
func (c *FileStream) Put(ctx context.Context, k Key, obj Object) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	rec, err := EncodeRecord(k, obj, c.opts.Record)
	if err != nil {
		return err
	}
	if c.opts.MaxBytes > 0 && int64(len(rec)) > c.opts.MaxBytes {
		c.tooLarge.Add(1)
		return fmt.Errorf("progcache: entry of %d bytes, filestream cap %d bytes: %w", len(rec), c.opts.MaxBytes, ErrTooLarge)
	}
	p := c.path(k)
	if err := os.MkdirAll(filepath.Dir(p), dirPerm); err != nil {
		return fmt.Errorf("progcache: create shard directory: %w", err)
	}
	old, statErr := os.Stat(p)
	if err := c.commit(p, rec); err != nil {
		return fmt.Errorf("progcache: commit entry %s: %w", k, err)
	}
	c.puts.Add(1)
	if statErr == nil {
		c.bytes.Add(-old.Size())
	} else {
		c.count.Add(1)
	}
	if c.bytes.Add(int64(len(rec))) > c.opts.MaxBytes && c.opts.MaxBytes > 0 {
		if _, err := c.prune(ctx, c.opts.MaxBytes, p); err != nil {
			return err
		}
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

// Delete removes k's entry; an absent entry is not an error.
func (c *FileStream) Delete(ctx context.Context, k Key) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	fi, err := os.Stat(c.path(k))
	if err == nil {
		err = os.Remove(c.path(k))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("progcache: delete entry %s: %w", k, err)
	}
	c.bytes.Add(-fi.Size())
	c.count.Add(-1)
	return nil
}

// Len counts the entries on disk.
func (c *FileStream) Len(ctx context.Context) (int, error) {
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	es, err := c.listEntries(ctx)
	return len(es), err
}

// Clear removes every entry (temp files of writers in flight are left).
func (c *FileStream) Clear(ctx context.Context) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	es, err := c.listEntries(ctx)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := os.Remove(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("progcache: clear: %w", err)
		}
	}
	c.scan(false)
	return nil
}

// Stats returns this process's counters and the last known contents.
func (c *FileStream) Stats() Stats {
	return Stats{
		Entries: c.count.Load(), Bytes: c.bytes.Load(), MaxBytes: c.opts.MaxBytes,
		Hits: c.hits.Load(), Misses: c.misses.Load(), Puts: c.puts.Load(),
		Evictions: c.evictions.Load(), TooLarge: c.tooLarge.Load(), Corrupt: c.corrupt.Load(),
		Unreadable: c.unreadable.Load(),
	}
}

// Close marks the cache closed. Files stay on disk.
func (c *FileStream) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.saveCounters()
}

// Persistent counters. Each FileStream adds its session's counts as one new
// file in stats/ when it closes (no shared file, so no lock), and folds the
// files into one when there are more than statsFold. Folding claims each
// file by renaming it to a private name first, so two folders never count a
// file twice; a crash mid-fold loses those counts, never doubles them.
const statsFold = 32

var statsSeq atomic.Uint64

func (c *FileStream) statsName(prefix string) string {
	return filepath.Join(c.stats, fmt.Sprintf("%s%d-%d-%d", prefix, os.Getpid(), time.Now().UnixNano(), statsSeq.Add(1)))
}

func (c *FileStream) sessionCounters() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Puts: c.puts.Load(),
		Evictions: c.evictions.Load(), TooLarge: c.tooLarge.Load(), Corrupt: c.corrupt.Load(),
		Unreadable: c.unreadable.Load()}
}

func (c *FileStream) writeCounters(s Stats) error {
	tmp := c.statsName(".new-")
	if err := os.WriteFile(tmp, encodeCounters(s), filePerm); err != nil {
		return fmt.Errorf("progcache: save counters: %w", err)
	}
	if err := os.Rename(tmp, c.statsName("")); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("progcache: save counters: %w", err)
	}
	return nil
}

func (c *FileStream) saveCounters() error {
	if s := c.sessionCounters(); s != (Stats{}) {
		if err := c.writeCounters(s); err != nil {
			return err
		}
	}
	ds, _ := os.ReadDir(c.stats)
	if len(ds) <= statsFold {
		return nil
	}
	var sum Stats
	var claimed []string
	for _, d := range ds {
		if strings.HasPrefix(d.Name(), ".") {
			continue // another process's claim or write in flight
		}
		mine := c.statsName(".fold-")
		if os.Rename(filepath.Join(c.stats, d.Name()), mine) != nil {
			continue // claimed by another folder
		}
		claimed = append(claimed, mine)
		if b, err := os.ReadFile(mine); err == nil {
			if s, ok := decodeCounters(b); ok {
				sum.addCounters(s, Stats{})
			}
		}
	}
	err := c.writeCounters(sum)
	if err == nil {
		for _, p := range claimed {
			os.Remove(p)
		}
	}
	return err
}

// Totals returns the counters of every FileStream session that closed on
// this directory plus this one's, and the entries and bytes of a fresh
// scan.
func (c *FileStream) Totals(ctx context.Context) (Stats, error) {
	if err := c.enter(ctx); err != nil {
		return Stats{}, err
	}
	t := c.sessionCounters()
	ds, _ := os.ReadDir(c.stats)
	for _, d := range ds {
		if strings.HasPrefix(d.Name(), ".") {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(c.stats, d.Name())); err == nil {
			if s, ok := decodeCounters(b); ok {
				t.addCounters(s, Stats{})
			}
		}
	}
	if _, err := c.scan(false); err != nil {
		return t, err
	}
	t.Entries, t.Bytes, t.MaxBytes = c.count.Load(), c.bytes.Load(), c.opts.MaxBytes
	return t, nil
}

// fileEntry is one committed entry found by a scan.
type fileEntry struct {
	key  Key
	path string
	info os.FileInfo
}

// listEntries lists committed entries. Files whose names are not keys
// (foreign files) are listed with a zero key only when foreign is asked for
// by the caller through listAll.
func (c *FileStream) listEntries(ctx context.Context) ([]fileEntry, error) {
	all, err := c.listAll(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(e fileEntry) bool { return e.key == (Key{}) }), nil
}

// listAll lists every regular file under entries/, foreign ones with a
// zero key.
func (c *FileStream) listAll(ctx context.Context) ([]fileEntry, error) {
	shards, err := os.ReadDir(c.entries)
	if err != nil {
		return nil, fmt.Errorf("progcache: scan %s: %w", c.entries, err)
	}
	var out []fileEntry
	for _, sh := range shards {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !sh.IsDir() {
			continue
		}
		sd := filepath.Join(c.entries, sh.Name())
		names, err := os.ReadDir(sd)
		if err != nil {
			continue // removed by a peer
		}
		for _, n := range names {
			fi, err := n.Info()
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			e := fileEntry{path: filepath.Join(sd, n.Name()), info: fi}
			if k, err := ParseKey(n.Name()); err == nil && strings.HasPrefix(n.Name(), sh.Name()) {
				e.key = k
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// scan recomputes the byte and entry counts (entries plus temp files) and
// sweeps temp and trash files older than the lease. It returns the entries
// found.
func (c *FileStream) scan(sweep bool) ([]fileEntry, error) {
	es, err := c.listEntries(context.Background())
	if err != nil {
		return nil, err
	}
	var total int64
	for _, e := range es {
		total += e.info.Size()
	}
	total += c.sweepDir(c.tmp, sweep)
	c.sweepDir(c.trash, sweep)
	if sweep {
		c.sweepLocks()
	}
	c.bytes.Store(total)
	c.count.Store(int64(len(es)))
	return es, nil
}

// sweepDir removes files older than the temp lease (when sweep is set) and
// returns the bytes of the files left.
func (c *FileStream) sweepDir(dir string, sweep bool) int64 {
	ds, _ := os.ReadDir(dir)
	var total int64
	deadline := time.Now().Add(-c.opts.TempLease)
	for _, d := range ds {
		fi, err := d.Info()
		if err != nil {
			continue
		}
		if sweep && fi.ModTime().Before(deadline) {
			if os.Remove(filepath.Join(dir, d.Name())) == nil {
				continue
			}
		}
		total += fi.Size()
	}
	return total
}

// sweepLocks removes lock files left by killed holders that no waiter came
// to break. A live holder refreshes its lock every LockLease/4, so a lock
// older than both leases is dead; the removal is identity-checked, so a
// lock retaken meanwhile survives.
func (c *FileStream) sweepLocks() {
	ds, _ := os.ReadDir(c.locks)
	deadline := time.Now().Add(-max(c.opts.TempLease, c.opts.LockLease))
	for _, d := range ds {
		if fi, err := d.Info(); err == nil && fi.ModTime().Before(deadline) {
			c.removeIfSame(filepath.Join(c.locks, d.Name()), fi)
		}
	}
}

// Prune evicts least recently used entries until entries plus temp files
// fit in maxBytes (0: only sweep), and returns how many entries it
// evicted. It is what Put runs when the cap is passed; the CLI runs it
// with --max-size.
func (c *FileStream) Prune(ctx context.Context, maxBytes int64) (int, error) {
	if err := c.enter(ctx); err != nil {
		return 0, err
	}
	if maxBytes < 0 {
		return 0, fmt.Errorf("progcache: prune to %d bytes: want 0 or more: %w", maxBytes, ErrInvalidConfig)
	}
	return c.prune(ctx, maxBytes, "")
}

// prune is Prune; keep names an entry that must not be chosen (the entry
// the calling Put just committed).
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
	slices.SortFunc(es, func(a, b fileEntry) int { return a.info.ModTime().Compare(b.info.ModTime()) })
	evicted := 0
	for _, e := range es {
		if total <= maxBytes {
			break
		}
		if e.path == keep {
			continue
		}
		if err := ctx.Err(); err != nil {
			return evicted, err
		}
		if c.hooks.beforeVictimRename != nil {
			c.hooks.beforeVictimRename(e.path)
		}
		if c.removeIfSame(e.path, e.info) {
			total -= e.info.Size()
			evicted++
			c.evictions.Add(1)
			c.count.Add(-1)
		}
	}
	c.bytes.Store(total)
	return evicted, nil
}

var trashSeq atomic.Uint64

// removeIfSame removes the file at p only if it is still the file chosen
// (same identity, size and mtime). It renames the file into trash/ first,
// so the comparison and the removal see one file; a mismatch means a peer
// replaced the entry after it was chosen, and that newer file is linked
// back to its name unless an even newer one is already there. It reports
// whether the chosen file was removed.
func (c *FileStream) removeIfSame(p string, chosen os.FileInfo) bool {
	if chosen == nil {
		return false
	}
	t := filepath.Join(c.trash, strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(trashSeq.Add(1), 10)+"-"+filepath.Base(p))
	if err := os.Rename(p, t); err != nil {
		return false // gone already, or renamed by a peer's prune
	}
	fi, err := os.Stat(t)
	if err == nil && sameFile(chosen, fi) {
		os.Remove(t)
		return true
	}
	// Not the file chosen: a peer committed a newer entry. Put it back
	// unless a newer one still has taken the name (Link fails then).
	_ = os.Link(t, p)
	os.Remove(t)
	return false
}

// sameFile compares file identity (device and inode, or volume and file
// index on Windows), size and modification time.
func sameFile(a, b os.FileInfo) bool {
	return sameIdentity(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// EntryInfo describes one entry on disk, for listing and verification.
type EntryInfo struct {
	Key     Key       `json:"key"`
	Size    int64     `json:"size"`
	Used    time.Time `json:"used"`
	Kind    string    `json:"kind,omitempty"`
	Name    string    `json:"name,omitempty"`
	CodeLen int       `json:"code_len"`
	// Err says why the entry could not be read; empty for a good entry.
	Err string `json:"error,omitempty"`
	// Unreadable is set when the entry was written under another
	// configuration (ErrUnreadable): not corrupt, and never removed.
	Unreadable bool `json:"unreadable,omitempty"`
}

// MarshalText lets EntryInfo's key print as hex in JSON.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText parses the hex form.
func (k *Key) UnmarshalText(b []byte) error {
	p, err := ParseKey(string(b))
	*k = p
	return err
}

// Entries lists the entries, least recently used first, reading each to
// report its kind and name; when verify is set, corrupt or foreign files
// are removed and counted (like Get would), otherwise they are reported
// with Err set.
func (c *FileStream) Entries(ctx context.Context, verify bool) ([]EntryInfo, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	all, err := c.listAll(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b fileEntry) int { return a.info.ModTime().Compare(b.info.ModTime()) })
	out := make([]EntryInfo, 0, len(all))
	for _, e := range all {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		ei := EntryInfo{Key: e.key, Size: e.info.Size(), Used: e.info.ModTime()}
		b, st, err := readEntry(e.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var sk Key
		var obj Object
		if err == nil {
			sk, obj, err = DecodeRecord(b, c.opts.Record)
		}
		if err == nil && (sk != e.key) {
			err = corruptf("file %s holds an entry for key %s", filepath.Base(e.path), sk)
		}
		if err != nil {
			ei.Err = err.Error()
			ei.Unreadable = errors.Is(err, ErrUnreadable)
			if verify && !ei.Unreadable && c.removeIfSame(e.path, st.info()) {
				c.corrupt.Add(1)
			}
		} else {
			ei.Kind, ei.Name, ei.CodeLen = obj.Kind, obj.Name, len(obj.Code)
		}
		out = append(out, ei)
	}
	return out, nil
}
