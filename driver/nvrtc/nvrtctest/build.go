//go:build linux && cgo

package nvrtctest

/*
#include <stdlib.h>

typedef long long (*counter_fn)(const char *);

static long long fk_counter(void *f, const char *n) { return ((counter_fn)f)(n); }
*/
import "C"

import (
	"testing"
	"unsafe"

	"github.com/accelkit/accelkit/driver/internal/cshared"
)

// Lib is one built instance of the fake. Its methods are safe for
// concurrent use.
type Lib struct {
	Path    string // the shared library, for nvrtc.Open or ACCELKIT_LIBNVRTC
	counter unsafe.Pointer
}

var source = &cshared.Source{
	Pkg:    "nvrtctest",
	What:   "the fake libnvrtc",
	File:   "fakenvrtc",
	Lib:    "libnvrtc-fake.so",
	Text:   Source,
	CFlags: []string{"-O1"},
}

// Build links a fresh instance of the fake into tb.TempDir(), without the
// entry points named in omit (to test a library that lacks them), and
// returns it. It skips tb when there is no C compiler and fails tb when
// building fails.
func Build(tb testing.TB, omit ...string) *Lib {
	tb.Helper()
	path := source.Link(tb, omit...)
	syms := source.Load(tb, path).Syms(tb, "fake_counter")
	return &Lib{Path: path, counter: syms["fake_counter"]}
}

// Count returns how often this instance's entry point name was called
// ("nvrtcCompileProgram"), or "live_programs": programs created and not yet
// destroyed. It is -1 for a name the fake does not count.
func (l *Lib) Count(name string) int64 {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return int64(C.fk_counter(l.counter, c))
}
