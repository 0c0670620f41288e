//go:build !windows && !plan9 && !solaris && !aix && !android

package bolt

import (
	"os"
	"syscall"
	"time"
)

// Where bbolt locks with flock(2) (bolt_unix.go), Open takes the same
// lock on the descriptor it then hands to bbolt, checks the file under it,
// and leaves it held: bbolt's own flock on that descriptor finds it held
// by the same open file and returns at once. A damaged file is renamed
// while the lock is held, so no other process can be using it or have set
// it aside and put a new file in its place meanwhile.

// boltOpenFlags are added to the open of an existing cache file: a named
// pipe put in its place between the Lstat and the open must not block it.
const boltOpenFlags = syscall.O_NONBLOCK

// boltRenameWhileOpen: an open, locked file may be renamed.
const boltRenameWhileOpen = true

// lockRetry is how often a held lock is tried again (as bbolt does).
const lockRetry = 50 * time.Millisecond

// lockBoltFile takes bbolt's lock on f: exclusive for a read-write open,
// shared for a read-only one, waiting up to timeout.
func lockBoltFile(f *os.File, exclusive bool, timeout time.Duration) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	fd := int(f.Fd())
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(fd, how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case err == syscall.EINTR:
			continue
		case err != syscall.EWOULDBLOCK:
			return err
		case time.Now().After(deadline):
			return errLockTimeout
		}
		time.Sleep(lockRetry)
	}
}

// handToBolt prepares a locked f for bolt.Open: nothing to do.
func handToBolt(*os.File) {}
