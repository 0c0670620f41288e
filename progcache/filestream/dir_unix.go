//go:build unix

package filestream

// cacheDir on Unix: a directory file descriptor, and the *at system calls.
//
// Every name is one path component resolved in the held directory; no call
// follows a symbolic link (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW, and renameat,
// linkat and unlinkat, which act on the link itself). A link, a pipe, a
// device or a file where the cache keeps a directory is reported as foreign
// (ErrNotCache), so a cache never reads, writes or removes anything outside
// its own tree, and a swap of a path component between a check and a use
// changes nothing: there is no second lookup.

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// cacheDir is a directory the cache holds open, through which every name
// below it is resolved.
//
// Locking: none of its own. A cacheDir does not change after it is opened
// and its methods are safe for concurrent use; Cache closes its
// directories only while holding life exclusively, so no method runs on a
// closed one. A subdir a method opens for its own use is closed by it.
type cacheDir struct {
	fd   int
	path string // for messages only
}

// fileStat is what the cache needs of a file's metadata.
type fileStat struct {
	mode     fs.FileMode
	size     int64
	mtime    time.Time
	dev, ino uint64
	ctime    int64 // Unix ns: any change to the file moves it, and no call sets it
	uid      uint32
}

// euid is this process's effective user id (ownedAlone).
var euid = uint32(os.Geteuid())

// ownedAlone reports whether only this process's user (and root) can
// write the file: it is ours, and writable by neither group nor others
// (with a POSIX ACL, the group bits are its mask, so no named entry can
// grant writing either). Such a file cannot be rewritten in place by
// anyone who lacks this user's rights, through write(2), which moves the
// ctime, or through a shared mapping, which need not: a MAC-sealed cache
// remembers only these (read.go). A chown or chmod moves the ctime.
func (s fileStat) ownedAlone() bool {
	return s.uid == euid && s.mode&0o022 == 0
}

func statOf(st *unix.Stat_t) fileStat {
	return fileStat{
		mode:  modeOf(uint32(widen(st.Mode))),
		size:  st.Size,
		mtime: time.Unix(st.Mtim.Unix()),
		dev:   widen(st.Dev),
		ino:   widen(st.Ino),
		ctime: st.Ctim.Nano(),
		uid:   st.Uid,
	}
}

// id is what verifiedFiles remembers of a verified file. Any write to the
// file, and any rename of another file over its name, changes it.
func (s fileStat) id() (fileID, bool) {
	return fileID{dev: s.dev, ino: s.ino, size: s.size, mtime: s.mtime.UnixNano(), ctime: s.ctime}, true
}

// widen converts a Stat_t field whose type differs by platform (Mode is
// uint16 on Darwin and the BSDs, uint32 on Linux; Dev is int32 on Darwin,
// uint64 on Linux), so that the conversion is neither missing on one
// platform nor redundant on another.
func widen[T ~uint16 | ~uint32 | ~uint64 | ~int32 | ~int64](v T) uint64 { return uint64(v) }

// same reports whether s and o are the same file in the same state:
// identity (device and inode), size and modification time.
func (s fileStat) same(o fileStat) bool {
	return s.dev == o.dev && s.ino == o.ino && s.size == o.size && s.mtime.Equal(o.mtime)
}

func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// openRootDir opens the cache root the caller named. Links in that path
// are the caller's to choose, so they are followed; nothing below it is.
func openRootDir(path string) (*cacheDir, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &cacheDir{fd: fd, path: path}, nil
}

func (d *cacheDir) join(name string) string { return d.path + string(os.PathSeparator) + name }

// stat describes the held directory itself.
func (d *cacheDir) stat() (fileStat, error) {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstat(d.fd, &st) }); err != nil {
		return fileStat{}, &fs.PathError{Op: "stat", Path: d.path, Err: err}
	}
	return statOf(&st), nil
}

// lstat describes name without following a link.
func (d *cacheDir) lstat(name string) (fileStat, error) {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
		return fileStat{}, &fs.PathError{Op: "lstat", Path: d.join(name), Err: err}
	}
	return statOf(&st), nil
}

// subdir opens the directory name, creating it first when create is set.
// Anything but a real directory there is foreign (ErrNotCache).
func (d *cacheDir) subdir(name string, create bool) (*cacheDir, error) {
	if create {
		err := unix.Mkdirat(d.fd, name, dirPerm)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, &fs.PathError{Op: "mkdir", Path: d.join(name), Err: err}
		}
	}
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		return err
	})
	if err == nil {
		return &cacheDir{fd: fd, path: d.join(name)}, nil
	}
	if errors.Is(err, unix.ENOENT) {
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	if st, serr := d.lstat(name); serr == nil && !st.mode.IsDir() {
		return nil, foreignError(d.join(name), st.mode, "a directory")
	}
	return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
}

// names lists the directory. It reads through a fresh open file
// description, so concurrent listings do not share a directory offset.
func (d *cacheDir) names() ([]string, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	return f.Readdirnames(-1)
}

// create makes a new file name (it must not exist) for writing.
func (d *cacheDir) create(name string) (*os.File, error) {
	var fd int
	err := ignoringEINTR(func() (err error) {
		fd, err = unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, filePerm)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: d.join(name), Err: err}
	}
	return os.NewFile(uintptr(fd), d.join(name)), nil
}

func (d *cacheDir) remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: d.join(name), Err: err}
	}
	return nil
}

// rename moves name to toName in dir to, replacing a file there.
func (d *cacheDir) rename(name string, to *cacheDir, toName string) error {
	if err := unix.Renameat(d.fd, name, to.fd, toName); err != nil {
		return &os.LinkError{Op: "rename", Old: d.join(name), New: to.join(toName), Err: err}
	}
	return nil
}

// link makes toName in dir to a hard link to name (the link itself, when
// name is one); it fails if toName exists.
func (d *cacheDir) link(name string, to *cacheDir, toName string) error {
	if err := unix.Linkat(d.fd, name, to.fd, toName, 0); err != nil {
		return &os.LinkError{Op: "link", Old: d.join(name), New: to.join(toName), Err: err}
	}
	return nil
}

func (d *cacheDir) sync() error {
	if err := unix.Fsync(d.fd); err != nil {
		return &fs.PathError{Op: "sync", Path: d.path, Err: err}
	}
	return nil
}

func (d *cacheDir) close() error {
	if d == nil {
		return nil
	}
	return unix.Close(d.fd)
}

// sameIdentity reports whether s and o are the same file (device and
// inode), whatever its size and times.
func (s fileStat) sameIdentity(o fileStat) bool { return s.dev == o.dev && s.ino == o.ino }

// fstatFile describes an open file.
func fstatFile(f *os.File) (fileStat, error) {
	var st unix.Stat_t
	sc, err := f.SyscallConn()
	if err != nil {
		return fileStat{}, err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), &st) }); err != nil {
		return fileStat{}, err
	}
	if serr != nil {
		return fileStat{}, &fs.PathError{Op: "stat", Path: f.Name(), Err: serr}
	}
	return statOf(&st), nil
}

// touchFile sets an open file's access and modification times through its
// descriptor.
func touchFile(f *os.File, t time.Time) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	tv := unix.NsecToTimeval(t.UnixNano())
	var terr error
	if err := sc.Control(func(fd uintptr) { terr = unix.Futimes(int(fd), []unix.Timeval{tv, tv}) }); err != nil {
		return err
	}
	return terr
}
