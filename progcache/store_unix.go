//go:build !windows

package progcache

// The per-system half of CannotStore (compile.go): errors of a full or
// read-only filesystem, which mean a cache cannot store here rather than a
// fault in it.

import (
	"errors"
	"syscall"
)

// storeUnavailable reports an error that means the cache cannot store
// here (a read-only or full filesystem, a quota), as opposed to a fault in
// the cache; CannotStore checks permission errors for every system.
func storeUnavailable(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
