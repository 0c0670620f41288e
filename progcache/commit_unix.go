//go:build !windows

package progcache

import (
	"errors"
	"syscall"
)

// renameRetrying renames once: a Unix rename replaces its target
// atomically whoever holds it open.
func renameRetrying(rename func() error) error { return rename() }

// storeUnavailable reports an error that means the cache cannot store
// here (a read-only or full filesystem), as opposed to a fault in the
// cache; cannotStore checks permission errors for every system.
func storeUnavailable(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
