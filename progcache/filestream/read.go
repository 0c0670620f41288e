package filestream

// The Cache read path: Get and View.
//
// A first hit opens the entry file from the held entries/ directory without
// following links (openat2 on Linux), fstats it, reads it whole with
// pread, and checks the record: structure, stored key and checksum. Get
// reads into a fresh buffer that the returned Object keeps; View reads
// into a pooled buffer that is reused once its callback returns, so a hit
// allocates nothing.
//
// Later hits. A CRC-32C of a 64 KiB record costs about 2.8 us here and each
// system call about 2 to 4 us (a VM), against an open+pread+close floor of
// about 10 us. So, as Bazel's digest cache and git's index do with file
// hashes, and nginx's open_file_cache with descriptors, the cache
// remembers per key the identity of the file whose checksum it verified
// (device, inode, size, mtime, ctime: verifiedFiles), and keeps the
// descriptor of a small verified file open. A later hit of a held file is
// then two system calls: pread from the held descriptor, then a stat of
// the entry's name (statx on Linux, not following links) that must show
// the same identity. The stat comes after the read, so a write that
// changed the bytes read had moved the ctime before the stat saw it (the
// kernel updates the times before it copies a write's data). A file that
// is remembered but not held (its descriptor let go of to stay within the
// bounds) is read with one more system call and no checksum: open, pread,
// fstat, close (readRemembered), the fstat again after the read; a file
// over 16 MiB takes the first-hit path without the checksum. The
// identities remembered and the descriptors held have separate bounds
// (maxVerified; maxHeld, maxHeldBytes), so letting go of a descriptor
// does not forget what was verified. Either way the record's structure
// and stored key are checked on every read; a mismatch of identity means
// a full first-hit read.
//
// Every write to a file moves its ctime, which no call can set back, and a
// new file (a rename over the entry) has another inode or a later ctime.
// Two limits, handled as git handles its "racy" entries: a file is
// remembered only once its ctime is racyWindow old, since a filesystem's
// timestamps may be coarse enough that a write in the same tick leaves
// ctime unchanged; and what a file's identity cannot show, its disk
// sectors rotting after the read (the page cache serving the verified
// bytes meanwhile), is found when the process next starts. A held
// descriptor keeps a replaced or deleted file's blocks until the next hit
// of its key sees the new identity, or until it is pushed out of the
// bound: at most maxHeld files of at most maxHeldSize bytes each and
// maxHeldBytes together. A
// MAC-sealed cache (RecordOptions.MACKey) remembers only files that no one
// but this process's user can write (mayRemember): owned by it, writable
// by neither group nor others; it verifies the MAC of any other file on
// every read, since such a file's owner could rewrite it through a shared
// mapping, which need not move the ctime. Options.VerifyEveryRead turns
// all of this off, and on Windows, whose stat has no change time, every
// read is a first-hit read.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

const (
	// racyWindow: a file verified less than this after its last change is
	// not remembered (coarse timestamps; FAT's are 2 s). Tests shorten it
	// through verifiedFiles.window.
	racyWindow = 2 * time.Second
	// maxVerified bounds the identities verifiedFiles remembers, held or
	// not (about 100 bytes each, so 1.6 MiB); past it an arbitrary one is
	// forgotten (that file is verified again on its next read). Letting go
	// of a held descriptor keeps the identity.
	maxVerified = 1 << 14
	// maxPooledRead: records larger than this are read into a fresh buffer
	// even by View, so the pool never pins a huge buffer.
	maxPooledRead = 16 << 20
	// maxHeld, maxHeldBytes and maxHeldSize bound the held descriptors:
	// at most 4096 files (and a quarter of the descriptor limit,
	// heldLimit) of at most 1 MiB each and 256 MiB together, so at most
	// 256 MiB of files that peers replaced or deleted stay allocated
	// until their key's next read, the descriptor's eviction or Close.
	// 4096 descriptors keep a working set of thousands of typical
	// (64 KiB) entries on the two-system-call path.
	maxHeld      = 4096
	maxHeldBytes = 256 << 20
	maxHeldSize  = 1 << 20
)

// entryPath is entryRel(k) as a NUL-terminated byte array: the read path
// opens an entry without building a string (openEntryAt).
type entryPath [3 + 2*progcache.KeySize + 1]byte

func makeEntryPath(k progcache.Key) (p entryPath) {
	hex.Encode(p[3:], k[:])
	p[0], p[1], p[2] = p[3], p[4], '/'
	return p
}

func (p *entryPath) shard() string { return string(p[:2]) }
func (p *entryPath) name() string  { return string(p[3 : len(p)-1]) }

// fileID identifies one version of a file (fileStat.id).
type fileID struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

// verifiedFile is one remembered file: its identity when its checksum
// passed, and its descriptor when held (fd >= 0).
type verifiedFile struct {
	id      fileID
	fd      int
	refs    int  // readers using fd
	dropped bool // out of the map: fd is closed when refs reaches 0
}

// verifiedFiles remembers the entry files whose checksum passed, and holds
// the descriptors of small ones (see the top of this file).
//
// The identities (m) and the held descriptors have separate bounds: a
// descriptor let go of to make room for another keeps its file's identity
// remembered, so the unchanged file is not checksummed again
// (readRemembered reads it).
//
// Locking: mu guards m, held, heldBytes and every verifiedFile's fields
// except the immutable id; it is held only for map and counter updates,
// never across a system call but the close of a dropped descriptor. A
// reader pins a held descriptor with acquire and unpins it with release,
// so a descriptor is never closed (and its number reused for another
// file) under a pread. window and the held bounds are set before the
// cache is shared.
type verifiedFiles struct {
	mu           sync.Mutex
	m            map[progcache.Key]*verifiedFile
	held         int           // descriptors held
	heldBytes    int64         // their files' sizes
	window       time.Duration // racyWindow; 0 only in tests
	maxHeld      int           // heldLimit(); smaller in tests
	maxHeldBytes int64         // maxHeldBytes; smaller in tests
}

// verified reports whether k's file, with stat st, was verified before.
func (v *verifiedFiles) verified(k progcache.Key, st fileStat) bool {
	id, ok := st.id()
	if !ok {
		return false
	}
	v.mu.Lock()
	f := v.m[k]
	v.mu.Unlock()
	return f != nil && f.id == id
}

// acquire returns k's held file, pinned, or nil.
func (v *verifiedFiles) acquire(k progcache.Key) *verifiedFile {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.m[k]
	if f == nil || f.fd < 0 {
		return nil
	}
	f.refs++
	return f
}

// remembered returns the identity k's file was verified with, when it is
// remembered but its descriptor is not held.
func (v *verifiedFiles) remembered(k progcache.Key) (fileID, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.m[k]
	if f == nil || f.fd >= 0 {
		return fileID{}, false
	}
	return f.id, true
}

// release unpins f, closing its descriptor if it was dropped meanwhile.
func (v *verifiedFiles) release(f *verifiedFile) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f.refs--
	v.closeIfDoneLocked(f)
}

func (v *verifiedFiles) closeIfDoneLocked(f *verifiedFile) {
	if f.dropped && f.refs == 0 && f.fd >= 0 {
		closeFD(f.fd)
		f.fd = -1
	}
}

// dropLocked takes f out of the map; mu is held.
func (v *verifiedFiles) dropLocked(k progcache.Key, f *verifiedFile) {
	delete(v.m, k)
	f.dropped = true
	if f.fd >= 0 {
		v.held--
		v.heldBytes -= f.id.size
	}
	v.closeIfDoneLocked(f)
}

// unholdLocked lets go of f's descriptor but keeps k's verified identity,
// so a later read of the unchanged file still skips the checksum; mu is
// held. A reader that pinned f closes the descriptor on release.
func (v *verifiedFiles) unholdLocked(k progcache.Key, f *verifiedFile) {
	v.m[k] = &verifiedFile{id: f.id, fd: -1}
	f.dropped = true
	v.held--
	v.heldBytes -= f.id.size
	v.closeIfDoneLocked(f)
}

// makeRoomLocked lets go of held descriptors, chosen arbitrarily, until
// one more of size bytes fits the bounds; it reports whether it does (a
// bound of 0 holds nothing). mu is held.
func (v *verifiedFiles) makeRoomLocked(size int64) bool {
	if size > maxHeldSize || v.maxHeld <= 0 || size > v.maxHeldBytes {
		return false
	}
	for v.held > 0 && (v.held >= v.maxHeld || v.heldBytes+size > v.maxHeldBytes) {
		for hk, hf := range v.m {
			if hf.fd >= 0 {
				v.unholdLocked(hk, hf)
				break
			}
		}
	}
	return true
}

// hold takes fd, open on k's file of identity id, as k's held descriptor
// when k is remembered with that identity and not held, and the bounds
// leave room without letting go of another; it reports whether it took fd
// (the caller must then not close it).
func (v *verifiedFiles) hold(k progcache.Key, id fileID, fd int) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.m[k]
	if f == nil || f.fd >= 0 || f.id != id || v.held >= v.maxHeld || v.heldBytes+id.size > v.maxHeldBytes || id.size > maxHeldSize {
		return false
	}
	f.fd = fd
	v.held++
	v.heldBytes += id.size
	return true
}

// remember records that k's file, with stat st, passed its checksum at
// now, unless it changed too recently to be told apart from a later write
// or its identity is unknown. fd, when not negative, is the open file: it
// is held if the bounds allow, and remember reports whether it took it
// (the caller must then not close it).
func (v *verifiedFiles) remember(k progcache.Key, st fileStat, now time.Time, fd int) (took bool) {
	id, ok := st.id()
	if !ok || now.UnixNano()-id.ctime < int64(v.window) {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = make(map[progcache.Key]*verifiedFile)
	}
	if old := v.m[k]; old != nil {
		v.dropLocked(k, old)
	} else if len(v.m) >= maxVerified {
		for anyKey, old := range v.m {
			v.dropLocked(anyKey, old)
			break
		}
	}
	f := &verifiedFile{id: id, fd: -1}
	if fd >= 0 && v.makeRoomLocked(id.size) {
		f.fd, took = fd, true
		v.held++
		v.heldBytes += id.size
	}
	v.m[k] = f
	return took
}

// forget drops k (its file changed, was removed or found corrupt).
func (v *verifiedFiles) forget(k progcache.Key) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if f := v.m[k]; f != nil {
		v.dropLocked(k, f)
	}
}

// forgetAll drops every file, closing the held descriptors (Close: no
// reader is in flight).
func (v *verifiedFiles) forgetAll() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, f := range v.m {
		v.dropLocked(k, f)
	}
}

// readBufs pools View's read buffers (*[]byte, any capacity up to
// maxPooledRead).
var readBufs sync.Pool

func getReadBuf(n int64) *[]byte {
	if bp, ok := readBufs.Get().(*[]byte); ok {
		if int64(cap(*bp)) >= n {
			*bp = (*bp)[:n]
			return bp
		}
		readBufs.Put(bp)
	}
	b := make([]byte, n, max(n, 64<<10))
	return &b
}

// read looks k up and, on a hit, calls fn with the record's View and
// returns fn's error. pooled selects a pooled buffer (View) over a fresh
// one that fn may keep (Get). countMiss is false for GetOrCompile's
// polling, whose repeated looks are one miss, already counted.
//
// fn runs after life is released, as the Viewer contract says: the View
// is in a buffer of its own, which needs no descriptor, so fn may call the
// cache, Close included, and a Close waiting for life never waits for fn
// (while fn, calling the cache, would wait for Close: a deadlock).
func (c *Cache) read(ctx context.Context, k progcache.Key, countMiss, pooled bool, fn func(progcache.View) error) (bool, error) {
	if err := c.enter(ctx); err != nil {
		return false, err
	}
	v, bp, ok, err := c.lookLocked(ctx, k, countMiss, pooled)
	c.life.RUnlock()
	if !ok || err != nil {
		return ok, err
	}
	if bp != nil {
		defer readBufs.Put(bp)
	}
	return true, fn(v)
}

// lookLocked is read's lookup, with life held shared. On a hit it returns
// the record's View and, when the View is in a pooled buffer, that
// buffer, for the caller to put back once the View is done.
func (c *Cache) lookLocked(ctx context.Context, k progcache.Key, countMiss, pooled bool) (_ progcache.View, _ *[]byte, ok bool, _ error) {
	rel := makeEntryPath(k)
	if f := c.verified.acquire(k); f != nil {
		v, bp, ok := c.readHeld(k, &rel, f, pooled)
		c.verified.release(f)
		if ok {
			c.hits.Add(1)
			c.touchHeld(&rel, f.id)
			return v, bp, true, nil
		}
		if bp != nil {
			readBufs.Put(bp)
		}
		c.verified.forget(k)
	} else if id, known := c.verified.remembered(k); known && id.size <= maxPooledRead {
		v, bp, ok := c.readRemembered(k, &rel, id, pooled)
		if ok {
			c.hits.Add(1)
			return v, bp, true, nil
		}
		if bp != nil {
			readBufs.Put(bp)
		}
		c.verified.forget(k)
	}
	e, err := c.entriesD.openEntryAt(&rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if countMiss {
			c.misses.Add(1)
		}
		return progcache.View{}, nil, false, nil
	case errors.Is(err, progcache.ErrNotCache):
		c.unreadable.Add(1)
		c.misses.Add(1)
		return progcache.View{}, nil, false, nil
	case err != nil:
		return progcache.View{}, nil, false, fmt.Errorf("filestream: read entry %s: %w", k, err)
	}
	held := false
	defer func() {
		if !held {
			e.close()
		}
	}()
	var buf []byte
	var bp *[]byte
	if pooled && e.st.size <= maxPooledRead {
		bp = getReadBuf(e.st.size)
		defer func() {
			if !ok {
				readBufs.Put(bp)
			}
		}()
		buf = *bp
	}
	sk, v, verified, err := c.readRecord(ctx, k, &e, buf, false)
	if err == nil && sk != k {
		err = corruptf("entry stored under key %s found under %s", sk, k)
	}
	switch {
	case err == nil:
	case errors.Is(err, progcache.ErrUnreadable):
		c.unreadable.Add(1)
		c.misses.Add(1)
		return progcache.View{}, nil, false, nil
	case errors.Is(err, progcache.ErrCorrupt):
		c.verified.forget(k)
		c.corrupt.Add(1)
		c.misses.Add(1)
		if !c.opts.ReadOnly {
			// Best effort: the Get is a miss either way, and an entry
			// left behind is found corrupt and removed again later.
			_, _ = c.removeEntryLocked(rel.shard(), rel.name(), e.st)
		}
		return progcache.View{}, nil, false, nil
	default:
		return progcache.View{}, nil, false, fmt.Errorf("filestream: read entry %s: %w", k, err)
	}
	now := time.Now()
	if !c.opts.ReadOnly && now.Sub(e.st.mtime) > recencyGranularity {
		_ = e.touch(now) // best effort: recency only orders eviction
	} else if verified && c.remembers() && c.mayRemember(e.st) {
		// A touched file's ctime just moved: it is remembered on a
		// later read.
		held = c.verified.remember(k, e.st, now, e.descriptor())
	}
	c.hits.Add(1)
	return v, bp, true, nil
}

// remembers reports whether verified files are remembered (see the top of
// this file).
func (c *Cache) remembers() bool {
	return !c.opts.VerifyEveryRead
}

// mayRemember reports whether a file whose check passed may be read
// without it while its identity holds: any file under a CRC-32C, which
// guards against damage, not against people; under a MAC, only a file
// that no one but this user can write (fileStat.ownedAlone). A file a
// peer without the key owns could hold a copy of a genuine record, pass
// its MAC, and be rewritten through a shared mapping without moving its
// ctime; its MAC is computed on every read.
func (c *Cache) mayRemember(st fileStat) bool {
	return c.opts.Record.MACKey == nil || st.ownedAlone()
}

// readHeld reads k's record from its held descriptor f and checks that
// the name still shows the identity f was verified with (after the read:
// see the top of this file), then the record's structure and key. ok false
// means the first-hit path must run; bp, when not nil, is the pooled
// buffer holding the record, for the caller to put back once v is done.
func (c *Cache) readHeld(k progcache.Key, rel *entryPath, f *verifiedFile, pooled bool) (v progcache.View, bp *[]byte, ok bool) {
	var buf []byte
	if pooled {
		bp = getReadBuf(f.id.size)
		buf = *bp
	} else {
		buf = make([]byte, f.id.size)
	}
	n, err := preadFD(f.fd, buf)
	if err != nil || n != len(buf) {
		return progcache.View{}, bp, false
	}
	st, err := c.entriesD.statEntryAt(rel)
	if err != nil {
		return progcache.View{}, bp, false
	}
	if id, known := st.id(); !known || id != f.id {
		return progcache.View{}, bp, false
	}
	sk, v, err := progcache.ViewVerifiedRecord(buf, c.opts.Record)
	if err != nil || sk != k {
		return progcache.View{}, bp, false
	}
	return v, bp, true
}

// readRemembered reads k's record from its file, remembered as verified
// with identity id but not held: open, pread of id.size bytes, fstat,
// close, one system call more than a plain read. The fstat comes after
// the read, as on the held path, and must show a regular file of identity
// id: the bytes are used only if they are the verified file's. Reading
// before the fstat reads nothing from anything else that may sit at the
// name: a link is not followed (openEntryFDAt), and a pipe or a directory
// fails the pread; a device node cannot be made there without privileges
// beyond the cache's owner's. ok false means the first-hit path must
// run; bp is as readHeld's.
func (c *Cache) readRemembered(k progcache.Key, rel *entryPath, id fileID, pooled bool) (v progcache.View, bp *[]byte, ok bool) {
	fd, err := c.entriesD.openEntryFDAt(rel)
	if err != nil {
		return progcache.View{}, nil, false
	}
	held := false
	defer func() {
		if !held {
			closeFD(fd)
		}
	}()
	var buf []byte
	if pooled {
		bp = getReadBuf(id.size)
		buf = *bp
	} else {
		buf = make([]byte, id.size)
	}
	if c.hooks.beforeRead != nil {
		c.hooks.beforeRead()
	}
	n, err := preadFD(fd, buf)
	if err != nil || n != len(buf) {
		return progcache.View{}, bp, false
	}
	st, err := fstatFD(fd)
	if err != nil || !st.mode.IsRegular() {
		return progcache.View{}, bp, false
	}
	if sid, known := st.id(); !known || sid != id {
		return progcache.View{}, bp, false
	}
	sk, v, err := progcache.ViewVerifiedRecord(buf, c.opts.Record)
	if err != nil || sk != k {
		return progcache.View{}, bp, false
	}
	// Recency, as a first-hit read refreshes it; the touch moves the
	// ctime, so the next read verifies the file and remembers it again.
	if now := time.Now(); !c.opts.ReadOnly && now.UnixNano()-id.mtime > int64(recencyGranularity) {
		_ = touchFD(fd, now) // best effort
	} else {
		held = c.verified.hold(k, id, fd) // where a held descriptor was let go of
	}
	return v, bp, true
}

// touchHeld refreshes the recency of a held file past recencyGranularity,
// as a first-hit read does; the touch moves its ctime, so the next read
// takes the first-hit path and remembers the file again.
func (c *Cache) touchHeld(rel *entryPath, id fileID) {
	if c.opts.ReadOnly || time.Now().UnixNano()-id.mtime <= int64(recencyGranularity) {
		return
	}
	e, err := c.entriesD.openEntryAt(rel)
	if err != nil {
		return
	}
	_ = e.touch(time.Now()) // best effort
	e.close()
}

// readRecord reads an open entry file, within the entry bound, into buf
// (a fresh buffer when buf is nil) and parses it, verifying its checksum
// unless verifiedFiles knows this file and always is false; verified
// reports whether the checksum was computed. An error is ErrCorrupt,
// ErrUnreadable, or an I/O or context error.
func (c *Cache) readRecord(ctx context.Context, k progcache.Key, e *entryFile, buf []byte, always bool) (sk progcache.Key, v progcache.View, verified bool, err error) {
	if e.st.size > c.opts.MaxEntryBytes {
		return progcache.Key{}, progcache.View{}, false, unreadablef("entry file of %d bytes is over this cache's entry bound of %d bytes", e.st.size, c.opts.MaxEntryBytes)
	}
	if e.st.size >= headerFirst {
		// Check the header before reading (or allocating for) a large
		// file whole: a record this cache cannot read costs one small read.
		var hb [progcache.RecordHeaderSize]byte
		h, err := e.readInto(ctx, hb[:])
		if err != nil {
			return progcache.Key{}, progcache.View{}, false, err
		}
		if err := progcache.CheckRecordHeader(h, c.opts.Record); err != nil {
			return progcache.Key{}, progcache.View{}, false, err
		}
	}
	if buf == nil {
		buf = make([]byte, e.st.size)
	}
	if c.hooks.beforeRead != nil {
		c.hooks.beforeRead()
	}
	b, err := e.readInto(ctx, buf)
	if err != nil {
		return progcache.Key{}, progcache.View{}, false, err
	}
	skip := c.remembers() && !always && c.verified.verified(k, e.st)
	if skip {
		// The identity is checked again after the read, as on the held
		// path: a write between the fstat and the read moved the ctime
		// before it changed the bytes read.
		st, err := e.stat()
		skip = err == nil && c.verified.verified(k, st)
	}
	if !skip && c.hooks.checksummed != nil {
		c.hooks.checksummed(k)
	}
	if skip {
		sk, v, err = progcache.ViewVerifiedRecord(b, c.opts.Record)
	} else {
		sk, v, err = progcache.ViewRecord(b, c.opts.Record)
	}
	return sk, v, !skip && err == nil, err
}
