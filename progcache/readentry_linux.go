//go:build linux

package progcache

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// maxReadChunk is the most one read(2) is asked for, as os.File does: Linux
// transfers at most about 2 GiB per call.
const maxReadChunk = 1 << 30

// entryStat is the fstat of the file readEntry read.
type entryStat struct {
	path string
	st   syscall.Stat_t
}

func (e *entryStat) size() int64        { return e.st.Size }
func (e *entryStat) modTime() time.Time { return time.Unix(e.st.Mtim.Unix()) }

// info returns the stat as an os.FileInfo for removeIfSame; only the
// corrupt path needs it, so a hit does not allocate one.
func (e *entryStat) info() os.FileInfo {
	return &statInfo{name: filepath.Base(e.path), st: e.st}
}

// readEntry reads the whole file at p with one open, fstat, read and
// close. It calls the system directly: os.Open on Linux offers every file
// to the netpoller (two fcntl calls to set O_NONBLOCK, an epoll_ctl that
// fails with EPERM on a regular file, two more to clear it), which more
// than doubles a hit's syscalls and, measured, costs about a quarter of a
// 64 KiB hit. A file over maxRecordRead, or one that cannot be read whole,
// returns no bytes and no error, so it decodes as corrupt.
func readEntry(p string) ([]byte, entryStat, error) {
	e := entryStat{path: p}
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, e, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer syscall.Close(fd)
	if err := ignoringEINTR(func() error { return syscall.Fstat(fd, &e.st) }); err != nil {
		return nil, e, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if e.st.Size > maxRecordRead {
		return nil, e, nil
	}
	b := make([]byte, e.st.Size)
	for n := 0; n < len(b); {
		m, err := syscall.Read(fd, b[n:min(len(b), n+maxReadChunk)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			// The file shrank under us (only a foreign writer does
			// that), or is not a regular file.
			return nil, e, nil
		}
		n += m
	}
	return b, e, nil
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != syscall.EINTR {
			return err
		}
	}
}

// sameIdentity reports whether a and b are the same file (device and
// inode), as os.SameFile does, but also for a statInfo.
func sameIdentity(a, b os.FileInfo) bool {
	sa, ok := a.Sys().(*syscall.Stat_t)
	sb, okb := b.Sys().(*syscall.Stat_t)
	return ok && okb && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// statInfo is an os.FileInfo built from a raw fstat, the way os builds
// one.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.st }

func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
