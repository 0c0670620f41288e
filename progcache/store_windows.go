//go:build windows

package progcache

// The per-system half of CannotStore (compile.go): errors of a full or
// write-protected disk, and of a file another process holds open, which
// mean a cache cannot store here rather than a fault in it.

import (
	"errors"
	"syscall"
)

const (
	errorWriteProtect     syscall.Errno = 19  // ERROR_WRITE_PROTECT
	errorSharingViolation syscall.Errno = 32  // ERROR_SHARING_VIOLATION
	errorHandleDiskFull   syscall.Errno = 39  // ERROR_HANDLE_DISK_FULL
	errorDiskFull         syscall.Errno = 112 // ERROR_DISK_FULL
)

// storeUnavailable reports an error that means the cache cannot store
// here (a full or write-protected disk, a target another process holds
// open: a rename over it fails with a sharing violation, or access denied
// while it is being deleted, past any retries), as opposed to a fault in
// the cache.
func storeUnavailable(err error) bool {
	return errors.Is(err, errorSharingViolation) || errors.Is(err, syscall.ERROR_ACCESS_DENIED) ||
		errors.Is(err, errorWriteProtect) || errors.Is(err, errorHandleDiskFull) || errors.Is(err, errorDiskFull)
}
