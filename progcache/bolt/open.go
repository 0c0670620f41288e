package bolt

// Opening a bolt file: what a path may hold, and what happens to each.
//
//   - nothing: a read-write open creates the file (O_EXCL, so never through
//     a dangling symbolic link); a read-only open fails (fs.ErrNotExist).
//   - a directory, a device, a named pipe, a socket: refused with
//     ErrNotCache naming what it is, never opened for writing, never moved.
//   - a symbolic link: followed to open a regular file the user pointed
//     at, but a cache behind a link is never set aside or replaced (that
//     would move the link or write through it): damage is reported with
//     ErrCorrupt instead, and a link to nothing is refused with ErrNotCache.
//   - a regular file: opened, locked as bbolt locks it (see lock_*.go)
//     and checked with checkBoltFile before bbolt maps it: a 0-byte file or
//     a bbolt database with no buckets is initialised, a sound cache is
//     used, a file that is not provably ours is refused with ErrNotCache
//     (left as it was), and a damaged file of ours is renamed to
//     <path>.corrupt-<unix ns> and a new one made in its place. Read-only,
//     nothing is created, initialised or moved: a damaged file is an error
//     wrapping ErrCorrupt.
//   - with Options.NoCreate, read-write: nothing is created or
//     initialised either (a missing path, a 0-byte file, a bbolt database
//     with no buckets: ErrNotCache naming the path); a damaged cache is
//     set aside but not rebuilt.

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/internal/fsmode"
	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

var errLockTimeout = errors.New("lock wait timed out")

// filePerm is the mode of a bolt file this package creates.
const filePerm = 0o600

func notCache(path, what string) error {
	return fmt.Errorf("bolt: %s %s; left untouched: %w", path, what, progcache.ErrNotCache)
}

// openBoltPath opens what path holds as a cache file (see the top of this
// file); created reports a new file.
func openBoltPath(path string, readOnly, noCreate bool) (f *os.File, viaLink, created bool, err error) {
	li, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if readOnly {
			return nil, false, false, fmt.Errorf("bolt: open file read-only: %w", err)
		}
		if noCreate {
			return nil, false, false, fmt.Errorf("bolt: %s does not exist, and this open creates no cache (Options.NoCreate): %w", path, errors.Join(err, progcache.ErrNotCache))
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
		if err != nil {
			return nil, false, false, fmt.Errorf("bolt: create file: %w", err)
		}
		return f, false, true, nil
	case err != nil:
		return nil, false, false, fmt.Errorf("bolt: open file: %w", err)
	}
	if li.Mode()&fs.ModeSymlink != 0 {
		ti, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, false, false, notCache(path, "is a symbolic link to nothing (a cache is never created through a link)")
		case err != nil:
			return nil, false, false, fmt.Errorf("bolt: open file: %w", err)
		case !ti.Mode().IsRegular():
			return nil, false, false, notCache(path, "is a symbolic link to "+fsmode.Describe(ti.Mode()))
		}
		viaLink = true
	} else if !li.Mode().IsRegular() {
		return nil, false, false, notCache(path, "is "+fsmode.Describe(li.Mode()))
	}
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err = os.OpenFile(path, flag|boltOpenFlags, 0)
	if err != nil {
		return nil, false, false, fmt.Errorf("bolt: open file: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		// Replaced between the Lstat and the open.
		f.Close()
		if err != nil {
			return nil, false, false, fmt.Errorf("bolt: open file: %w", err)
		}
		return nil, false, false, notCache(path, "is "+fsmode.Describe(fi.Mode()))
	}
	return f, viaLink, false, nil
}

// setAside renames the damaged file behind fi (open as f) to
// <path>.corrupt-<unix ns> and closes it, in the order the platform allows
// (see boltRenameWhileOpen), and only while path still names that regular
// file: never a link, never a file someone put there since.
func setAside(path string, fi os.FileInfo, closeFile func() error) (string, error) {
	// The file is damaged and on its way out: whether it was moved is what
	// counts, and a close error would not change what to do.
	if !boltRenameWhileOpen {
		_ = closeFile()
	}
	aside, err := func() (string, error) {
		li, err := os.Lstat(path)
		if err != nil || !li.Mode().IsRegular() || !os.SameFile(li, fi) {
			return "", fmt.Errorf("%s no longer names the damaged file; nothing moved", path)
		}
		for {
			aside := fmt.Sprintf("%s.corrupt-%d", path, time.Now().UnixNano())
			if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
				return aside, os.Rename(path, aside)
			}
		}
	}()
	if boltRenameWhileOpen {
		_ = closeFile()
	}
	return aside, err
}

// openFileLocked opens c.path as generation gen, setting aside (at most
// once) a damaged file of ours, and returns the handle and the entries to
// index.
func (c *Cache) openFileLocked(gen uint64) (*boltHandle, []*boltEntry, error) {
	for attempt := 0; ; attempt++ {
		h, es, aside, err := c.tryOpen(gen)
		if aside == "" {
			return h, es, err
		}
		c.opts.Logger.Warn("bolt: file set aside and rebuilt", "path", c.path, "moved_to", aside, "reason", err.Error())
		c.setAside = aside
		c.stats.Corrupt++
		if c.opts.NoCreate {
			return nil, nil, fmt.Errorf("bolt: file %s was damaged (%v) and set aside as %s; not rebuilt (Options.NoCreate): %w", c.path, err, aside, progcache.ErrCorrupt)
		}
		if attempt > 0 {
			return nil, nil, fmt.Errorf("bolt: file %s unusable after rebuild: %w", c.path, err)
		}
	}
}

// tryOpen opens, locks, checks and maps the file once, and returns the
// entries the check found. A damaged file of ours is set aside: aside is
// then where it went and err why.
func (c *Cache) tryOpen(gen uint64) (h *boltHandle, es []*boltEntry, aside string, err error) {
	ro := c.opts.ReadOnly
	locked := func() error {
		return fmt.Errorf("bolt: file %s is held by another process (waited %v): bbolt allows one read-write process at a time and is unsafe on network filesystems; use a progcache/filestream directory to share a cache: %w", c.path, c.opts.Timeout, ErrLocked)
	}
	var (
		f                *os.File
		fi               os.FileInfo
		viaLink, created bool
	)
	deadline := time.Now().Add(c.opts.Timeout)
	for {
		f, viaLink, created, err = openBoltPath(c.path, ro, c.opts.NoCreate)
		if err != nil {
			return nil, nil, "", err
		}
		if err := lockBoltFile(f, !ro, time.Until(deadline)); err != nil {
			f.Close()
			if errors.Is(err, errLockTimeout) {
				return nil, nil, "", locked()
			}
			return nil, nil, "", fmt.Errorf("bolt: lock file %s: %w", c.path, err)
		}
		if fi, err = f.Stat(); err != nil {
			f.Close()
			return nil, nil, "", fmt.Errorf("bolt: open file: %w", err)
		}
		// While this open waited for the lock, the holder may have
		// renamed a new file over the path (a compaction, or a damaged
		// file set aside and rebuilt): the lock is then on a file no
		// longer in use, and the path is opened again.
		if pi, err := os.Stat(c.path); err == nil && os.SameFile(pi, fi) {
			break
		}
		f.Close()
	}
	h = &boltHandle{file: f, info: fi, viaLink: viaLink, gen: gen}
	// damaged handles a damaged file of ours: set aside, or refused where
	// it may not be moved. closeFile closes what is open of it.
	damaged := func(why string, closeFile func() error) (*boltHandle, []*boltEntry, string, error) {
		switch {
		case ro:
			_ = closeFile() // the damage is the error to report
			return nil, nil, "", fmt.Errorf("bolt: file %s is damaged (%s); opened read-only, so left as it is: %w", c.path, why, progcache.ErrCorrupt)
		case viaLink:
			_ = closeFile() // the damage is the error to report
			return nil, nil, "", fmt.Errorf("bolt: file %s is damaged (%s) and is a symbolic link, so it is not set aside: move the file it points to away: %w", c.path, why, progcache.ErrCorrupt)
		}
		aside, err := setAside(c.path, fi, closeFile)
		if err != nil {
			return nil, nil, "", fmt.Errorf("bolt: file %s is damaged (%s) and could not be set aside: %w", c.path, why, errors.Join(err, progcache.ErrCorrupt))
		}
		return nil, nil, aside, fmt.Errorf("%s", why)
	}
	chk := checkBoltFile(f, fi.Size())
	switch chk.verdict {
	case boltForeign:
		f.Close()
		return nil, nil, "", notCache(c.path, chk.reason)
	case boltFresh:
		switch {
		case ro:
			f.Close()
			return nil, nil, "", notCache(c.path, "is "+chk.reason+", not yet a cache")
		case c.opts.NoCreate:
			f.Close()
			return nil, nil, "", notCache(c.path, "is "+chk.reason+", not yet a cache, and this open makes none (Options.NoCreate)")
		}
	case boltDamaged:
		return damaged(chk.reason, f.Close)
	}
	handToBolt(f)
	h.db, err = openBoltDB(c.path, f, bbolt.Options{Timeout: c.opts.Timeout, NoSync: c.opts.NoSync, ReadOnly: ro})
	if err == nil {
		h.db.AllocSize = growStep(c.opts.MaxBytes)
	}
	var dmg *boltDamage
	if errors.As(err, &dmg) {
		h.wedged.Store(true) // bbolt's Open stopped half way: only the descriptor can be closed
		return damaged(err.Error(), f.Close)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, berrors.ErrTimeout) { // where handToBolt let the lock go
			return nil, nil, "", locked()
		}
		return nil, nil, "", fmt.Errorf("bolt: open file %s: %w", c.path, err)
	}
	if chk.verdict == boltFresh {
		err = h.run(true, func(tx *bbolt.Tx) error {
			for _, b := range [][]byte{bucketMeta, bucketEntries, bucketATime} {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMeta).Put(keySchema, []byte(boltSchema))
		})
		if errors.As(err, &dmg) {
			return damaged(err.Error(), h.close)
		}
		if err != nil {
			h.close()
			if li, lerr := os.Lstat(c.path); created && lerr == nil && os.SameFile(li, fi) {
				os.Remove(c.path) // we made it, and it holds nothing
			}
			return nil, nil, "", fmt.Errorf("bolt: initialise file %s: %w", c.path, err)
		}
	}
	if !ro && !viaLink && boltRenameWhileOpen {
		sweepCompactTemps(c.path, c.opts.Logger)
	}
	return h, chk.entries, "", nil
}

// sweepCompactTemps removes what a compaction that died before its rename
// left beside path: regular files named <base>.compact-<digits>, which only
// compactInto creates. The caller holds the file's exclusive lock, and a
// compaction runs only under it, so none of them is in use; a link or a
// name of another shape is left alone.
func sweepCompactTemps(path string, log *slog.Logger) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return // the cache works without the sweep
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), base+".compact-")
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
			log.Info("bolt: removed a compaction's leftover file", "path", filepath.Join(dir, e.Name()))
		}
	}
}

// openBoltDB runs bolt.Open on the checked, locked descriptor f, turning a
// panic or memory fault into a *boltDamage.
func openBoltDB(path string, f *os.File, o bbolt.Options) (db *bbolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, &boltDamage{cause: fmt.Sprint(r)}
		}
	}()
	o.OpenFile = func(string, int, os.FileMode) (*os.File, error) { return f, nil }
	return bbolt.Open(path, filePerm, &o)
}
