//go:build unix

package filestream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/accelkit/accelkit/progcache"
)

// entryFile is an entry file open for reading, and its fstat. Its path is
// kept in parts and joined only for a message, so a hit builds no string.
type entryFile struct {
	fd               int
	st               fileStat
	dir, shard, name string
	at               *entryPath // shard and name, when opened by openEntryAt
}

func (e *entryFile) path() string {
	if e.at != nil {
		return e.dir + string(os.PathSeparator) + e.at.shard() + string(os.PathSeparator) + e.at.name()
	}
	if e.shard == "" {
		return e.dir + string(os.PathSeparator) + e.name
	}
	return e.dir + string(os.PathSeparator) + e.shard + string(os.PathSeparator) + e.name
}

// openEntry opens entries/shard/name for reading without following a link
// anywhere and without blocking (a named pipe opens at once), and checks
// that it is a regular file: anything else is foreign (ErrNotCache).
func (d *cacheDir) openEntry(shard, name string) (entryFile, error) {
	e := entryFile{dir: d.path, shard: shard, name: name}
	fd, err := d.openEntryFD(shard, name)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return e, &fs.PathError{Op: "open", Path: e.path(), Err: err}
		case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
			return e, d.describeForeign(shard, name)
		}
		return e, &fs.PathError{Op: "open", Path: e.path(), Err: err}
	}
	e.fd = fd
	return e, e.check()
}

// check reads the open file's fstat and makes sure it is a regular file;
// otherwise it closes the file.
func (e *entryFile) check() error {
	st, err := e.stat()
	if err != nil {
		unix.Close(e.fd)
		return &fs.PathError{Op: "stat", Path: e.path(), Err: err}
	}
	e.st = st
	if !e.st.mode.IsRegular() {
		unix.Close(e.fd)
		return foreignError(e.path(), e.st.mode, "a regular file")
	}
	return nil
}

// stat returns the open file's fstat now.
func (e *entryFile) stat() (fileStat, error) {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstat(e.fd, &st) }); err != nil {
		return fileStat{}, err
	}
	return statOf(&st), nil
}

// readSmall reads a small regular file whole (at most limit bytes); a
// link, pipe or device is foreign.
func (d *cacheDir) readSmall(name string, limit int) ([]byte, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		return err
	})
	if errors.Is(err, unix.ELOOP) {
		return nil, foreignError(d.join(name), fs.ModeSymlink, "a file")
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	e := entryFile{fd: fd, dir: d.path, name: name}
	if err := e.check(); err != nil {
		return nil, err
	}
	defer e.close()
	if e.st.size > int64(limit) {
		return nil, fmt.Errorf("filestream: %s is %d bytes, over %d, so this cache did not write it: %w", e.path(), e.st.size, limit, progcache.ErrNotCache)
	}
	return e.read(context.Background(), e.st.size)
}

// describeForeign names what is in the way of entries/shard/name.
func (d *cacheDir) describeForeign(shard, name string) error {
	st, err := d.lstat(shard)
	if err == nil && !st.mode.IsDir() {
		return foreignError(d.join(shard), st.mode, "a shard directory")
	}
	sd, err := d.subdir(shard, false)
	if err != nil {
		return foreignError(d.join(shard), fs.ModeSymlink, "a shard directory")
	}
	defer sd.close()
	if st, err := sd.lstat(name); err == nil {
		return foreignError(sd.join(name), st.mode, "a regular file")
	}
	return foreignError(sd.join(name), fs.ModeSymlink, "a regular file")
}

// readChunk is the most one read(2) is asked for, and how often a large
// read looks at its context.
const readChunk = 8 << 20

// read reads the first n bytes of the file (n at most its size), looking
// at ctx between chunks so a large read can be abandoned. A file that
// shrank under us (only a foreign writer does that) returns what it had.
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
		m, err := unix.Pread(e.fd, b[off:min(len(b), off+readChunk)], int64(off))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: e.path(), Err: err}
		}
		if m == 0 {
			return b[:off], nil
		}
		off += m
	}
	return b, nil
}

// touch sets the file's access and modification times through the open
// descriptor, so no path is looked up again.
func (e *entryFile) touch(t time.Time) error {
	tv := unix.NsecToTimeval(t.UnixNano())
	return unix.Futimes(e.fd, []unix.Timeval{tv, tv})
}

func (e *entryFile) close() { unix.Close(e.fd) }

// descriptor is the file's descriptor, for verifiedFiles to hold.
func (e *entryFile) descriptor() int { return e.fd }

// closeFD closes a descriptor the read path held (verifiedFiles).
func closeFD(fd int) { unix.Close(fd) }

// heldLimit is how many entry descriptors a Cache may hold:
// maxHeld, or a quarter of the process's descriptor limit if that is
// less, so held files leave the program most of its descriptors. (Go
// raises the soft limit to the hard one at start, so it is usually far
// above maxHeld.)
func heldLimit() int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return int(min(uint64(maxHeld), uint64(lim.Cur)/4))
}

// fstatFD returns the fstat of a descriptor the read path opened.
func fstatFD(fd int) (fileStat, error) {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return fileStat{}, err
	}
	return statOf(&st), nil
}

// touchFD sets the access and modification times of a descriptor the
// read path opened.
func touchFD(fd int, t time.Time) error {
	tv := unix.NsecToTimeval(t.UnixNano())
	return unix.Futimes(fd, []unix.Timeval{tv, tv})
}

// preadFD reads len(b) bytes from the start of fd, or fewer at its end.
func preadFD(fd int, b []byte) (int, error) {
	off := 0
	for off < len(b) {
		m, err := unix.Pread(fd, b[off:], int64(off))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return off, err
		}
		if m == 0 {
			break
		}
		off += m
	}
	return off, nil
}
