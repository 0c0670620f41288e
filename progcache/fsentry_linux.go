//go:build linux

package progcache

import (
	"errors"
	"sync/atomic"

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
