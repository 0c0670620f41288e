//go:build linux

package filestream

import (
	"errors"
	"io/fs"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2(2) is found missing (Linux before 5.6, or
// a seccomp filter that refuses it).
var noOpenat2 atomic.Bool

// openEntryFD opens shard/name in one system call: openat2 with
// RESOLVE_NO_SYMLINKS refuses a link in either component (ELOOP) and
// RESOLVE_BENEATH any escape, so a hit stays one open, fstat, read and
// close. Without openat2 it opens the shard, then the file, each with
// O_NOFOLLOW.
func (d *cacheDir) openEntryFD(shard, name string) (int, error) {
	if !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
		}
		var fd int
		err := ignoringEINTR(func() (err error) {
			fd, err = unix.Openat2(d.fd, shard+"/"+name, &how)
			return err
		})
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	return d.openEntryFDTwoStep(shard, name)
}

// entryHow is openat2's request for an entry file (see openEntryFD).
var entryHow = unix.OpenHow{
	Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC,
	Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
}

// openEntryAt is openEntry for the read path: it hands openat2 the
// NUL-terminated path in p directly, where unix.Openat2 would copy a Go
// string into a fresh buffer, so a hit builds no string and allocates
// nothing. The strings of a message are built only on an error, and
// without openat2 it falls back to openEntry.
func (d *cacheDir) openEntryAt(p *entryPath) (entryFile, error) {
	if noOpenat2.Load() {
		return d.openEntry(p.shard(), p.name())
	}
	var fd uintptr
	var errno unix.Errno
	for {
		fd, _, errno = unix.Syscall6(unix.SYS_OPENAT2, uintptr(d.fd), uintptr(unsafe.Pointer(&p[0])),
			uintptr(unsafe.Pointer(&entryHow)), unsafe.Sizeof(entryHow), 0, 0)
		if errno != unix.EINTR {
			break
		}
	}
	switch errno {
	case 0:
	case unix.ENOSYS, unix.EPERM:
		noOpenat2.Store(true)
		return d.openEntry(p.shard(), p.name())
	case unix.ENOTDIR, unix.ELOOP, unix.EXDEV:
		return entryFile{dir: d.path, shard: p.shard(), name: p.name()}, d.describeForeign(p.shard(), p.name())
	default:
		e := entryFile{dir: d.path, shard: p.shard(), name: p.name()}
		return e, &fs.PathError{Op: "open", Path: e.path(), Err: errno}
	}
	e := entryFile{fd: int(fd), dir: d.path, at: p}
	return e, e.check()
}

// openEntryFDAt opens entries/<p> as openEntryAt does, without the fstat:
// the read path for a remembered file stats it after reading
// (readRemembered). It returns the raw errno on failure.
func (d *cacheDir) openEntryFDAt(p *entryPath) (int, error) {
	if noOpenat2.Load() {
		return d.openEntryFD(p.shard(), p.name())
	}
	for {
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT2, uintptr(d.fd), uintptr(unsafe.Pointer(&p[0])),
			uintptr(unsafe.Pointer(&entryHow)), unsafe.Sizeof(entryHow), 0, 0)
		switch errno {
		case 0:
			return int(fd), nil
		case unix.EINTR:
			continue
		case unix.ENOSYS, unix.EPERM:
			noOpenat2.Store(true)
			return d.openEntryFD(p.shard(), p.name())
		}
		return -1, errno
	}
}

// statEntryAt stats entries/<p> without following a link, as an lstat
// would, for the held-file check: statx with the path in p handed to the
// kernel directly, so the check allocates nothing.
func (d *cacheDir) statEntryAt(p *entryPath) (fileStat, error) {
	var stx unix.Statx_t
	for {
		_, _, errno := unix.Syscall6(unix.SYS_STATX, uintptr(d.fd), uintptr(unsafe.Pointer(&p[0])),
			unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, uintptr(unsafe.Pointer(&stx)), 0)
		switch errno {
		case 0:
			return fileStat{
				mode:  modeOf(uint32(stx.Mode)),
				size:  int64(stx.Size),
				mtime: time.Unix(stx.Mtime.Sec, int64(stx.Mtime.Nsec)),
				dev:   unix.Mkdev(stx.Dev_major, stx.Dev_minor),
				ino:   stx.Ino,
				ctime: stx.Ctime.Sec*1e9 + int64(stx.Ctime.Nsec),
				uid:   stx.Uid,
			}, nil
		case unix.EINTR:
			continue
		}
		return fileStat{}, errno
	}
}
