//go:build windows

package progcache

import (
	"errors"
	"syscall"
	"time"
)

// Windows renames with MoveFileEx (MOVEFILE_REPLACE_EXISTING), which fails
// while another process holds the target open without FILE_SHARE_DELETE:
// a sharing violation, or access denied while the target is being deleted.
// Those two are retried a bounded number of times with a doubling pause,
// as the Go command's robustio does; any other error is returned at once,
// and an exhausted retry leaves the entry unstored: a later miss, not a
// failed compile (storeUnavailable).
const (
	errorWriteProtect     syscall.Errno = 19  // ERROR_WRITE_PROTECT
	errorSharingViolation syscall.Errno = 32  // ERROR_SHARING_VIOLATION
	errorHandleDiskFull   syscall.Errno = 39  // ERROR_HANDLE_DISK_FULL
	errorDiskFull         syscall.Errno = 112 // ERROR_DISK_FULL
)

func renameRetrying(rename func() error) error {
	return retryRename(rename, renameRetryable, time.Sleep)
}

func renameRetryable(err error) bool {
	return errors.Is(err, errorSharingViolation) || errors.Is(err, syscall.ERROR_ACCESS_DENIED)
}

// storeUnavailable reports an error that means the cache cannot store
// here (a full or write-protected disk, a target held open past the
// retries), as opposed to a fault in the cache.
func storeUnavailable(err error) bool {
	return renameRetryable(err) || errors.Is(err, errorWriteProtect) ||
		errors.Is(err, errorHandleDiskFull) || errors.Is(err, errorDiskFull)
}
