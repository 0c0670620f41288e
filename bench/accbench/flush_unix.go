//go:build unix

package accbench

import "syscall"

// flushDirty writes dirty file pages back (sync(2)), so that a read
// benchmark after a write phase does not compete with the kernel's
// writeback of that phase.
func flushDirty() { syscall.Sync() }
