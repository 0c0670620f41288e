//go:build !(linux && cgo)

package nvrtctest

import "testing"

// Lib is one built instance of the fake.
type Lib struct {
	Path string // the shared library, for nvrtc.Open or ACCELKIT_LIBNVRTC
}

// Build skips tb: loading a shared library needs cgo on Linux.
func Build(tb testing.TB, omit ...string) *Lib {
	tb.Helper()
	tb.Skip("nvrtctest: the fake libnvrtc needs cgo on linux (built with CGO_ENABLED=0 or another OS)")
	return nil
}

// Count returns how often the entry point name was called.
func (l *Lib) Count(name string) int64 { return -1 }
