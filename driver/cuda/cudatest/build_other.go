//go:build !(linux && cgo)

package cudatest

import "testing"

// Lib is one built instance of the fake.
type Lib struct {
	Path string // the shared library, for the DSN's lib= or ACCELKIT_LIBCUDA
}

// Build skips tb: loading a shared library needs cgo on Linux.
func Build(tb testing.TB) *Lib {
	tb.Helper()
	tb.Skip("cudatest: the fake libcuda needs cgo on linux (built with CGO_ENABLED=0 or another OS)")
	return nil
}

// Counter returns how often an entry point was called.
func (l *Lib) Counter(name string) int64 { return -1 }

// DefaultStreamUses returns how often calls named the default stream by
// handle h.
func (l *Lib) DefaultStreamUses(h uintptr) int64 { return -1 }

// LiveDeviceAllocations counts the live cuMemAlloc_v2 allocations.
func (l *Lib) LiveDeviceAllocations() int64 { return -1 }
