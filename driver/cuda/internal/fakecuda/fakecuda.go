//go:build linux && cgo

// Package fakecuda builds and controls the fake libcuda of
// driver/cuda/cudatest/testdata/fakecuda.c for the cuda backend's tests.
//
// Build compiles the C source once per process with the system C compiler
// and links one shared library per call into the test's temporary
// directory, leaving chosen entry points out through a linker version
// script. Each library is its own file without a soname, so every call gets
// an independent instance (its own devices, counters and injected faults)
// inside one test process. The controls reach that instance through dlopen
// of the same path, which returns the handle the backend loaded.
package fakecuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef long long (*counter_fn)(const char *);
typedef unsigned (*flags_fn)(const char *);
typedef int (*fail_fn)(const char *, int, long long, long long);
typedef void (*setvmm_fn)(int);
typedef int (*ptrdev_fn)(unsigned long long);
typedef long long (*live_fn)(int);
typedef int (*curdev_fn)(void);
typedef int (*failstream_fn)(int, void *, int);
typedef int (*poison_fn)(int, int);
typedef long long (*images_fn)(int);

static void *fk_open(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char *fk_error(void) { return dlerror(); }
static void *fk_sym(void *h, const char *name) { return dlsym(h, name); }
static long long fk_counter(void *f, const char *n) { return ((counter_fn)f)(n); }
static unsigned fk_flags(void *f, const char *n) { return ((flags_fn)f)(n); }
static int fk_fail(void *f, const char *n, int code, long long after, long long times) { return ((fail_fn)f)(n, code, after, times); }
static void fk_setvmm(void *f, int on) { ((setvmm_fn)f)(on); }
static int fk_ptrdev(void *f, unsigned long long p) { return ((ptrdev_fn)f)(p); }
static long long fk_live(void *f, int kind) { return ((live_fn)f)(kind); }
static int fk_curdev(void *f) { return ((curdev_fn)f)(); }
static int fk_failstream(void *f, int dev, void *s, int code) { return ((failstream_fn)f)(dev, s, code); }
static int fk_poison(void *f, int dev, int code) { return ((poison_fn)f)(dev, code); }
static long long fk_images(void *f, int library) { return ((images_fn)f)(library); }
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

// Source is the fake's C source, relative to the cuda package directory
// (where its tests run).
const Source = "cudatest/testdata/fakecuda.c"

// Region kinds for Live.
const (
	LiveDevice  = 0 // cuMemAlloc_v2 allocations
	LiveHost    = 1 // cuMemHostAlloc allocations
	LiveReserve = 2 // cuMemAddressReserve reservations
	LiveMap     = 3 // cuMemMap mappings
	LiveHostReg = 4 // cuMemHostRegister_v2 registrations
)

// Lib is one built instance of the fake. Its methods are safe for
// concurrent use (the fake's controls are).
type Lib struct {
	Path string // the shared library, for ACCELKIT_LIBCUDA or the DSN's lib
	h    unsafe.Pointer
	syms map[string]unsafe.Pointer
}

var object struct {
	once sync.Once
	dir  string
	path string
	err  error
	skip string
}

// compiler is $CC, else cc.
func compiler() string {
	if cc := os.Getenv("CC"); cc != "" {
		return cc
	}
	return "cc"
}

// compile builds the object file once per process.
func compile() {
	cc, err := exec.LookPath(compiler())
	if err != nil {
		object.skip = fmt.Sprintf("no C compiler (%s): %v", compiler(), err)
		return
	}
	if _, err := os.Stat(Source); err != nil {
		object.skip = fmt.Sprintf("fake libcuda source not found (run the tests from driver/cuda): %v", err)
		return
	}
	object.dir, object.err = os.MkdirTemp("", "fakecuda-")
	if object.err != nil {
		return
	}
	object.path = filepath.Join(object.dir, "fakecuda.o")
	args := append([]string{"-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-c", "-o", object.path, Source}, sanitizeFlags...)
	out, err := exec.Command(cc, args...).CombinedOutput()
	if err != nil {
		object.err = fmt.Errorf("compiling %s: %w\n%s", Source, err, out)
	}
}

// Cleanup removes the compiled object; call it from TestMain after m.Run.
func Cleanup() {
	if object.dir != "" {
		os.RemoveAll(object.dir)
	}
}

// Build links a fresh instance of the fake into t.TempDir(), without the
// entry points named in omit, and loads it. It skips t when there is no C
// compiler or no source, and fails t when building fails. env is set
// (t.Setenv) before the library loads, for the FAKECUDA_* variables its
// constructor reads.
func Build(t testing.TB, env map[string]string, omit ...string) *Lib {
	t.Helper()
	object.once.Do(compile)
	if object.skip != "" {
		t.Skip(object.skip)
	}
	if object.err != nil {
		t.Fatal(object.err)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libcuda-fake.so")
	args := append([]string{"-shared", "-o", lib, object.path, "-lpthread"}, sanitizeFlags...)
	if len(omit) > 0 {
		script := filepath.Join(dir, "omit.map")
		body := "{ global: *; local: " + strings.Join(omit, "; ") + "; };\n"
		if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-Xlinker", "--version-script="+script) // -Wl would split a path at commas
	}
	if out, err := exec.Command(compiler(), args...).CombinedOutput(); err != nil {
		t.Fatalf("linking the fake libcuda: %v\n%s", err, out)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	cpath := C.CString(lib)
	defer C.free(unsafe.Pointer(cpath))
	h := C.fk_open(cpath)
	if h == nil {
		t.Fatalf("loading the fake libcuda: %s", C.GoString(C.fk_error()))
	}
	l := &Lib{Path: lib, h: h, syms: map[string]unsafe.Pointer{}}
	for _, name := range []string{"fake_counter", "fake_last_flags", "fake_fail", "fake_set_vmm", "fake_ptr_device", "fake_live", "fake_current_device", "fake_fail_stream", "fake_poison", "fake_live_images"} {
		cname := C.CString(name)
		f := C.fk_sym(h, cname)
		C.free(unsafe.Pointer(cname))
		if f == nil {
			t.Fatalf("fake libcuda lacks its control %s", name)
		}
		l.syms[name] = f
	}
	return l
}

// Counter returns how often an entry point was called, or an extra counter:
// "ctx_mismatch" (stream or event work issued while another context was
// current), "streams_without_non_blocking", "events_with_timing",
// "launch_library_kernel" and "launch_module_function" (launches of a
// cuLibraryGetKernel kernel, of a cuModuleGetFunction function),
// "launches_not_executed" (launches of kernels the fake does not run: all
// but the four reference kernels), "unload_before_sync" (unloads of a
// module launched since its context's last cuCtxSynchronize).
func (l *Lib) Counter(name string) int64 {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return int64(C.fk_counter(l.syms["fake_counter"], c))
}

// LastFlags returns the flags of the last cuStreamCreate, cuEventCreate,
// cuMemHostAlloc or cuMemHostRegister_v2.
func (l *Lib) LastFlags(name string) uint32 {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return uint32(C.fk_flags(l.syms["fake_last_flags"], c))
}

// Fail makes entry point name return code for times calls (-1: forever)
// after after more calls succeed; code 0 clears.
func (l *Lib) Fail(name string, code int, after, times int64) error {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	if C.fk_fail(l.syms["fake_fail"], c, C.int(code), C.longlong(after), C.longlong(times)) != 0 {
		return fmt.Errorf("fakecuda: no entry point %q", name)
	}
	return nil
}

// SetVMM sets what the devices report for
// CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED.
func (l *Lib) SetVMM(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.fk_setvmm(l.syms["fake_set_vmm"], C.int(v))
}

// PtrDevice returns the device of the allocation starting at p, or -1.
func (l *Lib) PtrDevice(p uint64) int {
	return int(C.fk_ptrdev(l.syms["fake_ptr_device"], C.ulonglong(p)))
}

// Live counts the live regions of a kind (LiveDevice, ...).
func (l *Lib) Live(kind int) int64 {
	return int64(C.fk_live(l.syms["fake_live"], C.int(kind)))
}

// CurrentDevice returns the device of the calling thread's current context
// in the fake, or -1; meaningful only on a locked OS thread.
func (l *Lib) CurrentDevice() int {
	return int(C.fk_curdev(l.syms["fake_current_device"]))
}

// FailStream arms stream s (a CUstream; nil: the default stream) of device
// dev: the next work queued on it fails and poisons the device's context
// with code, as a faulting kernel does; every later call in that context
// returns code until the primary context is destroyed.
func (l *Lib) FailStream(dev int, s unsafe.Pointer, code int) error {
	if C.fk_failstream(l.syms["fake_fail_stream"], C.int(dev), s, C.int(code)) != 0 {
		return fmt.Errorf("fakecuda: FailStream: unknown device %d or stream %p", dev, s)
	}
	return nil
}

// Poison makes every later call in device dev's primary context return
// code, as after a fault of earlier work.
func (l *Lib) Poison(dev, code int) error {
	if C.fk_poison(l.syms["fake_poison"], C.int(dev), C.int(code)) != 0 {
		return fmt.Errorf("fakecuda: Poison: unknown device %d", dev)
	}
	return nil
}

// LiveImages counts the loaded libraries (cuLibraryLoadData, library true)
// or modules (cuModuleLoadDataEx).
func (l *Lib) LiveImages(library bool) int64 {
	v := 0
	if library {
		v = 1
	}
	return int64(C.fk_images(l.syms["fake_live_images"], C.int(v)))
}
