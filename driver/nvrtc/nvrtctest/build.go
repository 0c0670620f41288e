//go:build linux && cgo

package nvrtctest

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef long long (*counter_fn)(const char *);

static void *fk_open(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char *fk_error(void) { return dlerror(); }
static void *fk_sym(void *h, const char *name) { return dlsym(h, name); }
static long long fk_counter(void *f, const char *n) { return ((counter_fn)f)(n); }
*/
import "C"

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// Lib is one built instance of the fake. Its methods are safe for
// concurrent use.
type Lib struct {
	Path    string // the shared library, for nvrtc.Open or ACCELKIT_LIBNVRTC
	counter unsafe.Pointer
}

// object is the fake compiled once per process, kept in memory so that no
// file outlives the test that linked it.
var object struct {
	once  sync.Once
	bytes []byte
	skip  string
	err   error
}

// compiler is $CC, else cc.
func compiler() string {
	if cc := os.Getenv("CC"); cc != "" {
		return cc
	}
	return "cc"
}

func compile() {
	cc, err := exec.LookPath(compiler())
	if err != nil {
		object.skip = fmt.Sprintf("nvrtctest: no C compiler to build the fake libnvrtc (%s): %v", compiler(), err)
		return
	}
	dir, err := os.MkdirTemp("", "fakenvrtc-")
	if err != nil {
		object.err = err
		return
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "fakenvrtc.c")
	obj := filepath.Join(dir, "fakenvrtc.o")
	if err := os.WriteFile(src, []byte(Source), 0o644); err != nil {
		object.err = err
		return
	}
	out, err := exec.Command(cc, "-O1", "-fPIC", "-fvisibility=hidden", "-Wall", "-c", "-o", obj, src).CombinedOutput()
	if err != nil {
		object.err = fmt.Errorf("nvrtctest: compiling the fake libnvrtc: %w\n%s", err, out)
		return
	}
	object.bytes, object.err = os.ReadFile(obj)
}

// Build links a fresh instance of the fake into tb.TempDir(), without the
// entry points named in omit (to test a library that lacks them), and
// returns it. It skips tb when there is no C compiler and fails tb when
// building fails.
func Build(tb testing.TB, omit ...string) *Lib {
	tb.Helper()
	object.once.Do(compile)
	if object.skip != "" {
		tb.Skip(object.skip)
	}
	if object.err != nil {
		tb.Fatal(object.err)
	}
	dir := tb.TempDir()
	obj := filepath.Join(dir, "fakenvrtc.o")
	if err := os.WriteFile(obj, object.bytes, 0o644); err != nil {
		tb.Fatal(err)
	}
	lib := filepath.Join(dir, "libnvrtc-fake.so")
	args := []string{"-shared", "-o", lib, obj}
	if len(omit) > 0 {
		script := filepath.Join(dir, "omit.map")
		body := "{ global: *; local: " + strings.Join(omit, "; ") + "; };\n"
		if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
		args = append(args, "-Xlinker", "--version-script="+script) // -Wl would split a path at commas
	}
	if out, err := exec.Command(compiler(), args...).CombinedOutput(); err != nil {
		tb.Fatalf("nvrtctest: linking the fake libnvrtc: %v\n%s", err, out)
	}
	cpath := C.CString(lib)
	defer C.free(unsafe.Pointer(cpath))
	h := C.fk_open(cpath)
	if h == nil {
		tb.Fatalf("nvrtctest: loading the fake libnvrtc: %s", C.GoString(C.fk_error()))
	}
	cname := C.CString("fake_counter")
	defer C.free(unsafe.Pointer(cname))
	f := C.fk_sym(h, cname)
	if f == nil {
		tb.Fatal("nvrtctest: the fake libnvrtc lacks fake_counter")
	}
	return &Lib{Path: lib, counter: f}
}

// Count returns how often this instance's entry point name was called
// ("nvrtcCompileProgram"), or "live_programs": programs created and not yet
// destroyed. It is -1 for a name the fake does not count.
func (l *Lib) Count(name string) int64 {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return int64(C.fk_counter(l.counter, c))
}
