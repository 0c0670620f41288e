//go:build !(linux && cgo)

package cudatest

import (
	"errors"
	"testing"
	"unsafe"
)

// Lib is one built instance of the fake.
type Lib struct {
	Path string // the shared library, for the DSN's lib= or ACCELKIT_LIBCUDA
}

// Build skips tb: loading a shared library needs cgo on Linux.
func Build(tb testing.TB) *Lib {
	tb.Helper()
	return BuildWith(tb, Options{})
}

// BuildWith skips tb: loading a shared library needs cgo on Linux.
func BuildWith(tb testing.TB, o Options) *Lib {
	tb.Helper()
	tb.Skip("cudatest: the fake libcuda needs cgo on linux (built with CGO_ENABLED=0 or another OS)")
	return nil
}

var errNoFake = errors.New("cudatest: the fake libcuda needs cgo on linux")

// Counter returns how often an entry point was called.
func (l *Lib) Counter(name string) int64 { return -1 }

// DefaultStreamUses returns how often calls named the default stream by
// handle h.
func (l *Lib) DefaultStreamUses(h uintptr) int64 { return -1 }

// LiveDeviceAllocations counts the live cuMemAlloc_v2 allocations.
func (l *Lib) LiveDeviceAllocations() int64 { return -1 }

// Live counts the live regions of a kind.
func (l *Lib) Live(kind int) int64 { return -1 }

// LastFlags returns the flags of the last call of name.
func (l *Lib) LastFlags(name string) uint32 { return 0 }

// Fail makes entry point name fail.
func (l *Lib) Fail(name string, code int, after, times int64) error { return errNoFake }

// SetVMM sets whether the devices report VMM support.
func (l *Lib) SetVMM(on bool) {}

// PtrDevice returns the device of the allocation starting at p, or -1.
func (l *Lib) PtrDevice(p uint64) int { return -1 }

// CurrentDevice returns the device of the calling thread's current context,
// or -1.
func (l *Lib) CurrentDevice() int { return -1 }

// FailStream arms stream s of device dev to fail.
func (l *Lib) FailStream(dev int, s unsafe.Pointer, code int) error { return errNoFake }

// Poison poisons device dev's primary context.
func (l *Lib) Poison(dev, code int) error { return errNoFake }

// LiveImages counts the loaded libraries or modules.
func (l *Lib) LiveImages(library bool) int64 { return -1 }
