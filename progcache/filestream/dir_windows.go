//go:build windows

package filestream

// cacheDir on Windows: an os.Root over the cache root and a path inside it.
//
// os.Root keeps every operation beneath the root (a link that leads out is
// refused) and each name is checked with Lstat before use, so a link where
// the cache keeps a file or directory is foreign (ErrNotCache). Windows has
// no *at calls for every operation, so a swap between the check and the
// use is not excluded as it is on Unix; creating links there needs a
// privilege most users lack.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// cacheDir is a directory the cache holds open, through which every name
// below it is resolved.
//
// Locking: none of its own. A cacheDir does not change after it is opened
// and its methods are safe for concurrent use; Cache closes its
// directories only while holding life exclusively, so no method runs on a
// closed one. A subdir a method opens for its own use is closed by it.
type cacheDir struct {
	root *os.Root
	rel  string // "." for the root
	path string // for messages only
	own  bool   // this value closes root
}

type fileStat struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	fi    fs.FileInfo
}

func statOf(fi fs.FileInfo) fileStat {
	return fileStat{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime(), fi: fi}
}

// id is false on Windows: its stat has no change time, so Cache
// verifies every read there.
func (s fileStat) id() (fileID, bool) { return fileID{}, false }

// ownedAlone is false on Windows, where files are not remembered anyway.
func (s fileStat) ownedAlone() bool { return false }

func (s fileStat) same(o fileStat) bool {
	return s.fi != nil && o.fi != nil && os.SameFile(s.fi, o.fi) && s.size == o.size && s.mtime.Equal(o.mtime)
}

func openRootDir(path string) (*cacheDir, error) {
	r, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return &cacheDir{root: r, rel: ".", path: path, own: true}, nil
}

func (d *cacheDir) join(name string) string { return filepath.Join(d.path, name) }
func (d *cacheDir) name(n string) string    { return filepath.Join(d.rel, n) }

func (d *cacheDir) stat() (fileStat, error) {
	fi, err := d.root.Stat(d.rel)
	if err != nil {
		return fileStat{}, err
	}
	return statOf(fi), nil
}

func (d *cacheDir) lstat(name string) (fileStat, error) {
	fi, err := d.root.Lstat(d.name(name))
	if err != nil {
		return fileStat{}, err
	}
	return statOf(fi), nil
}

func (d *cacheDir) subdir(name string, create bool) (*cacheDir, error) {
	if create {
		if err := d.root.Mkdir(d.name(name), dirPerm); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	st, err := d.lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.mode.IsDir() {
		return nil, foreignError(d.join(name), st.mode, "a directory")
	}
	return &cacheDir{root: d.root, rel: d.name(name), path: d.join(name)}, nil
}

func (d *cacheDir) names() ([]string, error) {
	f, err := d.root.Open(d.rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func (d *cacheDir) create(name string) (*os.File, error) {
	return d.root.OpenFile(d.name(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
}

func (d *cacheDir) readSmall(name string, limit int) ([]byte, error) {
	st, err := d.lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.mode.IsRegular() {
		return nil, foreignError(d.join(name), st.mode, "a file")
	}
	f, err := d.root.Open(d.name(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("filestream: %s is over %d bytes, so this cache did not write it: %w", d.join(name), limit, progcache.ErrNotCache)
	}
	return b, nil
}

func (d *cacheDir) remove(name string) error { return d.root.Remove(d.name(name)) }

func (d *cacheDir) rename(name string, to *cacheDir, toName string) error {
	return d.root.Rename(d.name(name), to.name(toName))
}

func (d *cacheDir) link(name string, to *cacheDir, toName string) error {
	return d.root.Link(d.name(name), to.name(toName))
}

// sync is a no-op: Windows cannot flush a directory handle, and NTFS
// journals the rename itself.
func (d *cacheDir) sync() error { return nil }

func (d *cacheDir) close() error {
	if d == nil || !d.own {
		return nil
	}
	return d.root.Close()
}

type entryFile struct {
	f    *os.File
	st   fileStat
	path string
	root *os.Root
	rel  string
}

// Windows never holds a descriptor (fileStat.id is false there), so the
// held-file functions are never reached; they fail if they were.
var errNoHeldFiles = errors.New("filestream: held entry files are not used on Windows")

func closeFD(int) {}

// descriptor is -1: no descriptor is held on Windows.
func (e *entryFile) descriptor() int { return -1 }

func preadFD(int, []byte) (int, error)                       { return 0, errNoHeldFiles }
func heldLimit() int                                         { return 0 }
func fstatFD(int) (fileStat, error)                          { return fileStat{}, errNoHeldFiles }
func touchFD(int, time.Time) error                           { return errNoHeldFiles }
func (d *cacheDir) openEntryFDAt(*entryPath) (int, error)    { return -1, errNoHeldFiles }
func (d *cacheDir) statEntryAt(*entryPath) (fileStat, error) { return fileStat{}, errNoHeldFiles }

// openEntryAt is openEntry (see the Linux version).
func (d *cacheDir) openEntryAt(p *entryPath) (entryFile, error) {
	return d.openEntry(p.shard(), p.name())
}

func (d *cacheDir) openEntry(shard, name string) (entryFile, error) {
	e := entryFile{path: filepath.Join(d.join(shard), name)}
	sd, err := d.subdir(shard, false)
	if err != nil {
		return e, err
	}
	st, err := sd.lstat(name)
	if err != nil {
		return e, err
	}
	if !st.mode.IsRegular() {
		return e, foreignError(e.path, st.mode, "a regular file")
	}
	f, err := sd.root.Open(sd.name(name))
	if err != nil {
		return e, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return e, err
	}
	e.f, e.st, e.root, e.rel = f, statOf(fi), sd.root, sd.name(name)
	if !e.st.mode.IsRegular() {
		f.Close()
		return e, foreignError(e.path, e.st.mode, "a regular file")
	}
	return e, nil
}

const readChunk = 8 << 20

func (e *entryFile) read(ctx context.Context, n int64) ([]byte, error) {
	return e.readInto(ctx, make([]byte, n))
}

// readInto fills b from the start of the file, as read does.
func (e *entryFile) readInto(ctx context.Context, b []byte) ([]byte, error) {
	for off := 0; off < len(b); {
		if off > 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		m, err := e.f.ReadAt(b[off:min(len(b), off+readChunk)], int64(off))
		off += m
		if err == io.EOF {
			return b[:off], nil
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (e *entryFile) touch(t time.Time) error { return e.root.Chtimes(e.rel, t, t) }

func (e *entryFile) close() { e.f.Close() }

func (s fileStat) sameIdentity(o fileStat) bool {
	return s.fi != nil && o.fi != nil && os.SameFile(s.fi, o.fi)
}

// stat returns the open file's stat now.
func (e *entryFile) stat() (fileStat, error) { return fstatFile(e.f) }

func fstatFile(f *os.File) (fileStat, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileStat{}, err
	}
	return statOf(fi), nil
}

// touchFile sets an open file's times by its path (Windows has no
// descriptor-relative call in the standard library).
func touchFile(f *os.File, t time.Time) error { return os.Chtimes(f.Name(), t, t) }
