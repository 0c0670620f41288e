//go:build windows

package filestream

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
// failed compile (progcache.CannotStore, whose Windows half accepts the
// same two errors).
const errorSharingViolation syscall.Errno = 32 // ERROR_SHARING_VIOLATION

func renameRetrying(rename func() error) error {
	return retryRename(rename, renameRetryable, time.Sleep)
}

func renameRetryable(err error) bool {
	return errors.Is(err, errorSharingViolation) || errors.Is(err, syscall.ERROR_ACCESS_DENIED)
}
