//go:build linux || darwin

package bolt

import (
	"os"
	"syscall"
)

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o600) }

// mknodZero makes a character device node at p like /dev/zero (needs root).
func mknodZero(p string) error {
	fi, err := os.Stat("/dev/zero")
	if err != nil {
		return err
	}
	return syscall.Mknod(p, syscall.S_IFCHR|0o600, int(fi.Sys().(*syscall.Stat_t).Rdev))
}
