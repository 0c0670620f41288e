package bolt

// Compaction: keeping the file within a bound of what it holds.
//
// bbolt never gives pages back to the filesystem: pages freed by evictions
// go on its free list, and a value that needs a run of pages the free list
// cannot give grows the file. Under a byte cap the file kept growing (16
// MiB after 100 MiB of puts at a 4 MiB cap). So after each write the cache
// looks at bbolt's free pages, and when they pass compactShare of the pages
// below the high-water mark (and the file is past compactMinBytes), it
// compacts: bbolt.Compact copies every bucket into a new file beside the
// old one (<path>.compact-<unix ns>, created with O_EXCL, pages filled
// completely), which is synced and renamed over the path, and the cache
// carries on with it. bbolt also grows a file in steps of DB.AllocSize
// (16 MiB by default) past what it needs; the cache sets it to growStep.
//
// The bound: after a write returns, the file is at most
//
//	max(compactMinBytes, inUse/(1-compactShare) + growStep) = max(1 MiB, 2 x inUse + growStep)
//
// where inUse is the pages bbolt holds in use: the records (at most
// MaxBytes), their keys and access times, and bbolt's page overhead (a
// value rounded up to whole pages, leaf pages filled to 50-100%). Measured:
// see TestBoltFileBounded and BenchmarkBoltCompact.
//
// Readers and locks. Compaction runs with Cache.mu held (no write) and
// dbMu held exclusively, so no transaction of this process is open on the
// old file while it is copied and swapped. The new file is locked
// (exclusively, as bbolt locks) before it is renamed over the path, and the
// old one's lock is released only after: no other process can use either
// meanwhile. A process that opened the old file and waits for its lock
// gets it once the cache lets go of it, finds that the path names another
// file (tryOpen compares the locked descriptor with the path) and opens the
// path again, so it never reads or writes the file that was replaced.
//
// Compaction is skipped where it cannot be made safe: read-only, a cache
// reached through a symbolic link (the link must not be replaced by a
// file), and platforms where an open file cannot be renamed over or bbolt
// does not lock per descriptor (boltRenameWhileOpen: Windows, and the
// fcntl platforms of lock_other.go). A compaction that fails leaves the
// old file in use and removes the new one; damage met while copying is
// handled like any other (repair.go).

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bbolt "go.etcd.io/bbolt"
)

const (
	// compactShare is the share of the pages below the high-water mark
	// that may be free before the file is compacted.
	compactShare = 0.5
	// compactMinBytes: a file smaller than this is never compacted (a
	// small file is not worth a copy per write).
	compactMinBytes = 1 << 20
	// compactTxBytes bounds the memory of one compaction transaction.
	compactTxBytes = 16 << 20
	// minGrowStep and maxGrowStep bound growStep.
	minGrowStep = 1 << 20
	maxGrowStep = 16 << 20
)

// growStep is how far past its need bbolt grows the file (DB.AllocSize):
// a sixteenth of the cap, between 1 and 16 MiB (bbolt's default), so that
// the step stays small beside the cap.
func growStep(maxBytes int64) int {
	if maxBytes == 0 {
		return maxGrowStep
	}
	return int(min(max(maxBytes/16, minGrowStep), maxGrowStep))
}

// shouldCompact reports whether h's file is larger than
// max(compactMinBytes, its pages in use / (1-compactShare) + step), the
// pages in use being those below the high-water mark (read from the
// current meta page) less bbolt's free and pending pages (its stats after
// the last write).
func (h *boltHandle) shouldCompact(step int) bool {
	if h.wedged.Load() {
		return false
	}
	fi, err := h.file.Stat()
	if err != nil || fi.Size() < compactMinBytes {
		return false
	}
	ps := int64(h.db.Info().PageSize)
	m0 := parseBoltMeta(readAtMost(h.file, 0, boltPageHeader+boltMetaSize))
	m1 := parseBoltMeta(readAtMost(h.file, ps, boltPageHeader+boltMetaSize))
	if !m0.valid || m1.valid && m1.txid > m0.txid {
		m0 = m1
	}
	if !m0.valid {
		return false // the next transaction meets the damage
	}
	inUse := int64(m0.pgid)*ps - int64(h.db.Stats().FreeAlloc)
	return fi.Size() > int64(float64(inUse)/(1-compactShare))+int64(step)
}

// maybeCompactLocked compacts the file after a write when shouldCompact
// says so (see the top of this file); mu is held. A compaction that fails
// is logged and the cache goes on with the old file; damage found while
// copying is repaired as any other.
func (c *Cache) maybeCompactLocked() {
	if c.opts.ReadOnly || !boltRenameWhileOpen || c.closed || c.broken != nil {
		return
	}
	c.dbMu.RLock()
	h := c.h
	ok := h != nil && !h.viaLink && h.shouldCompact(growStep(c.opts.MaxBytes))
	c.dbMu.RUnlock()
	if !ok {
		return
	}
	if err := c.compactLocked(); err != nil {
		if _, err := c.settleLocked(c.gen, err); err != nil {
			c.opts.Logger.Warn("bolt: compaction failed; the file stays as it was", "path", c.path, "reason", err.Error())
		}
	}
}

// compactLocked copies the open file into a new one and renames it over
// the path; mu is held. On an error the old file stays in use (a
// *boltDamage: it was found damaged).
func (c *Cache) compactLocked() error {
	c.dbMu.Lock()
	defer c.dbMu.Unlock()
	old := c.h
	if old == nil {
		return errNoHandle
	}
	nh, tmp, err := compactInto(c.path, old, growStep(c.opts.MaxBytes), !c.opts.NoSync)
	if err != nil {
		return err
	}
	nh.db.NoSync, nh.db.NoGrowSync = c.opts.NoSync, false
	// Rename only while the path still names the file being replaced:
	// never over something put there since.
	li, err := os.Lstat(c.path)
	if err == nil && (!li.Mode().IsRegular() || !os.SameFile(li, old.info)) {
		err = fmt.Errorf("%s no longer names the cache file", c.path)
	}
	if err == nil {
		err = os.Rename(tmp, c.path)
	}
	if err != nil {
		nh.close()
		os.Remove(tmp)
		return fmt.Errorf("bolt: compact file %s: %w", c.path, err)
	}
	if !c.opts.NoSync {
		syncDir(filepath.Dir(c.path))
	}
	// The old file's lock goes only now: a process waiting for it finds
	// the path renamed and opens it again (tryOpen).
	if err := old.close(); err != nil {
		c.opts.Logger.Warn("bolt: closing the file replaced by compaction", "path", c.path, "reason", err.Error())
	}
	c.h = nh
	return nil
}

// compactInto copies old into a new file beside path, locked and (with
// sync) synced, and returns its handle (the same generation) and name. On an error
// nothing is left behind.
func compactInto(path string, old *boltHandle, step int, sync bool) (nh *boltHandle, tmp string, err error) {
	tmp = fmt.Sprintf("%s.compact-%d", path, time.Now().UnixNano())
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return nil, "", fmt.Errorf("bolt: compact file %s: %w", path, err)
	}
	fail := func(err error) (*boltHandle, string, error) {
		f.Close()
		os.Remove(tmp)
		return nil, "", err
	}
	if err := lockBoltFile(f, true, 0); err != nil {
		return fail(fmt.Errorf("bolt: lock compacted file %s: %w", tmp, err))
	}
	handToBolt(f)
	// Synced once, at the end (unless Options.NoSync, which accepts a
	// file lost to a crash): a crash before the rename leaves only the
	// temporary file.
	db, err := openBoltDB(tmp, f, bbolt.Options{NoSync: true, NoGrowSync: true, Timeout: time.Second})
	if err != nil {
		return fail(fmt.Errorf("bolt: create compacted file %s: %w", tmp, err))
	}
	db.AllocSize = step // the new file grows to what it holds + step
	nh = &boltHandle{db: db, file: f, gen: old.gen}
	if err := compactFrom(db, old); err != nil {
		nh.close()
		os.Remove(tmp)
		return nil, "", err
	}
	if err := syncFile(f, sync); err != nil {
		nh.close()
		os.Remove(tmp)
		return nil, "", fmt.Errorf("bolt: sync compacted file %s: %w", tmp, err)
	}
	if nh.info, err = f.Stat(); err != nil {
		nh.close()
		os.Remove(tmp)
		return nil, "", fmt.Errorf("bolt: compact file %s: %w", path, err)
	}
	return nh, tmp, nil
}

// compactFrom runs bbolt.Compact from old into dst. bbolt reads old
// outside boltHandle.run, so a panic or fault there (old damaged behind
// the lock) is caught here and wedges old, as run would.
func compactFrom(dst *bbolt.DB, old *boltHandle) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			old.wedged.Store(true)
			err = damageFrom(r)
		}
	}()
	if old.wedged.Load() {
		return errWedged
	}
	return bbolt.Compact(dst, old.db, compactTxBytes)
}

// syncFile fsyncs f when sync is set.
func syncFile(f *os.File, sync bool) error {
	if !sync {
		return nil
	}
	return f.Sync()
}

// syncDir fsyncs dir so that a rename in it survives a crash; where a
// directory cannot be synced the rename stands unsynced.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync() // best effort: the rename is made either way
	d.Close()
}
