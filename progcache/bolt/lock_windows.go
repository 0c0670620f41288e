package bolt

import (
	"errors"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// bbolt locks a one-byte range at offset 2^64-1 with LockFileEx
// (bolt_windows.go); a second LockFileEx on the same handle fails, so
// Open takes that lock to check the file and releases it just before
// bolt.Open takes it again. Windows does not rename an open file, so a
// damaged one is closed first and renamed only if the path still names it.

const boltOpenFlags = 0

const boltRenameWhileOpen = false

const lockRetry = 50 * time.Millisecond

var (
	kernel32         = syscall.NewLazyDLL("kernel32.dll")
	procLockFileEx   = kernel32.NewProc("LockFileEx")
	procUnlockFileEx = kernel32.NewProc("UnlockFileEx")
)

const (
	lockfileFailImmediately = 0x1
	lockfileExclusiveLock   = 0x2
	errorLockViolation      = syscall.Errno(33)
)

func lockBoltFile(f *os.File, exclusive bool, timeout time.Duration) error {
	flags := uint32(lockfileFailImmediately)
	if exclusive {
		flags |= lockfileExclusiveLock
	}
	deadline := time.Now().Add(timeout)
	for {
		ol := syscall.Overlapped{Offset: ^uint32(0), OffsetHigh: ^uint32(0)}
		r, _, err := procLockFileEx.Call(f.Fd(), uintptr(flags), 0, 1, 0, uintptr(unsafe.Pointer(&ol)))
		switch {
		case r != 0:
			return nil
		case !errors.Is(err, errorLockViolation):
			return err
		case time.Now().After(deadline):
			return errLockTimeout
		}
		time.Sleep(lockRetry)
	}
}

// handToBolt releases the lock for bolt.Open to take.
func handToBolt(f *os.File) {
	ol := syscall.Overlapped{Offset: ^uint32(0), OffsetHigh: ^uint32(0)}
	// Call's error is never nil. Unlocking the range lockBoltFile locked on
	// this handle does not fail; were it to, bolt.Open's lock times out and
	// Open reports ErrLocked.
	_, _, _ = procUnlockFileEx.Call(f.Fd(), 0, 1, 0, uintptr(unsafe.Pointer(&ol)))
}
