//go:build linux && cgo

package cudatest

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef long long (*counter_fn)(const char *);
typedef long long (*uses_fn)(int);
typedef long long (*live_fn)(int);

static void *fk_open(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char *fk_error(void) { return dlerror(); }
static void *fk_sym(void *h, const char *name) { return dlsym(h, name); }
static long long fk_counter(void *f, const char *n) { return ((counter_fn)f)(n); }
static long long fk_uses(void *f, int h) { return ((uses_fn)f)(h); }
static long long fk_live(void *f, int kind) { return ((live_fn)f)(kind); }

// The entry points a foreign runtime calls itself, for Runtime.
typedef int (*init_fn)(unsigned);
typedef int (*devget_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*release_fn)(int);
typedef int (*setcur_fn)(void *);
typedef int (*getcur_fn)(void **);
typedef int (*screate_fn)(void **, unsigned);
typedef int (*sdestroy_fn)(void *);

static int fk_init(void *f) { return ((init_fn)f)(0); }
static int fk_retain(void *get, void *retain, int ordinal, uintptr_t *out) {
	int d = 0;
	void *ctx = NULL;
	int r = ((devget_fn)get)(&d, ordinal);
	if (r != 0) return r;
	r = ((retain_fn)retain)(&ctx, d);
	*out = (uintptr_t)ctx;
	return r;
}
static int fk_release(void *get, void *release, int ordinal) {
	int d = 0;
	int r = ((devget_fn)get)(&d, ordinal);
	if (r != 0) return r;
	return ((release_fn)release)(d);
}
static int fk_setcur(void *f, uintptr_t ctx) { return ((setcur_fn)f)((void *)ctx); }
static uintptr_t fk_getcur(void *f) { void *c = NULL; return ((getcur_fn)f)(&c) == 0 ? (uintptr_t)c : 0; }
static int fk_screate(void *f, uintptr_t *s) { void *h = NULL; int r = ((screate_fn)f)(&h, 0); *s = (uintptr_t)h; return r; }
static int fk_sdestroy(void *f, uintptr_t s) { return ((sdestroy_fn)f)((void *)s); }
*/
import "C"

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"
)

// Lib is one built instance of the fake. Its methods are safe for
// concurrent use; they read this process's instance, which is the one a
// cgo caller in the same process loads from Path (dlopen returns the same
// handle), not the one a child process loads.
type Lib struct {
	Path string // the shared library, for the DSN's lib= or ACCELKIT_LIBCUDA
	syms map[string]unsafe.Pointer
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
		object.skip = fmt.Sprintf("cudatest: no C compiler to build the fake libcuda (%s): %v", compiler(), err)
		return
	}
	dir, err := os.MkdirTemp("", "fakecuda-")
	if err != nil {
		object.err = err
		return
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "fakecuda.c")
	obj := filepath.Join(dir, "fakecuda.o")
	if err := os.WriteFile(src, []byte(Source), 0o644); err != nil {
		object.err = err
		return
	}
	out, err := exec.Command(cc, "-O2", "-fPIC", "-fvisibility=hidden", "-Wall", "-c", "-o", obj, src).CombinedOutput()
	if err != nil {
		object.err = fmt.Errorf("cudatest: compiling the fake libcuda: %w\n%s", err, out)
		return
	}
	object.bytes, object.err = os.ReadFile(obj)
}

// Build links a fresh instance of the fake into tb.TempDir() and returns
// it, loaded into this process. It skips tb when there is no C compiler
// and fails tb when building fails.
func Build(tb testing.TB) *Lib {
	tb.Helper()
	object.once.Do(compile)
	if object.skip != "" {
		tb.Skip(object.skip)
	}
	if object.err != nil {
		tb.Fatal(object.err)
	}
	dir := tb.TempDir()
	obj := filepath.Join(dir, "fakecuda.o")
	if err := os.WriteFile(obj, object.bytes, 0o644); err != nil {
		tb.Fatal(err)
	}
	lib := filepath.Join(dir, "libcuda-fake.so")
	if out, err := exec.Command(compiler(), "-shared", "-o", lib, obj, "-lpthread").CombinedOutput(); err != nil {
		tb.Fatalf("cudatest: linking the fake libcuda: %v\n%s", err, out)
	}
	cpath := C.CString(lib)
	defer C.free(unsafe.Pointer(cpath))
	h := C.fk_open(cpath)
	if h == nil {
		tb.Fatalf("cudatest: loading the fake libcuda: %s", C.GoString(C.fk_error()))
	}
	l := &Lib{Path: lib, syms: map[string]unsafe.Pointer{}}
	for _, name := range []string{"fake_counter", "fake_default_stream_uses", "fake_live",
		"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
		"cuCtxSetCurrent", "cuCtxGetCurrent", "cuStreamCreate", "cuStreamDestroy_v2"} {
		cname := C.CString(name)
		f := C.fk_sym(h, cname)
		C.free(unsafe.Pointer(cname))
		if f == nil {
			tb.Fatalf("cudatest: the fake libcuda lacks %s", name)
		}
		l.syms[name] = f
	}
	return l
}

// Counter returns how often an entry point was called ("cuMemAlloc_v2"),
// or an extra counter ("ctx_mismatch": stream or event work issued while
// another context was current); -1 for a name the fake does not count.
func (l *Lib) Counter(name string) int64 {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return int64(C.fk_counter(l.syms["fake_counter"], c))
}

// DefaultStreamUses returns how often calls named the default stream by
// handle h: 0, 0x1 (CU_STREAM_LEGACY) or 0x2 (CU_STREAM_PER_THREAD); -1
// for another h.
func (l *Lib) DefaultStreamUses(h uintptr) int64 {
	if h > 2 {
		return -1
	}
	return int64(C.fk_uses(l.syms["fake_default_stream_uses"], C.int(h)))
}

// LiveDeviceAllocations counts the live cuMemAlloc_v2 allocations.
func (l *Lib) LiveDeviceAllocations() int64 {
	return int64(C.fk_live(l.syms["fake_live"], 0))
}

// Runtime calls the fake as a foreign CUDA runtime (PyTorch's, through
// libcudart) does, not through driver/cuda: it retains a device's primary
// context, makes it current on the calling thread and creates streams of
// its own. The thread-bound methods need a locked OS thread
// (runtime.LockOSThread).
type Runtime struct{ l *Lib }

// Runtime returns l's foreign-runtime view; it runs cuInit first.
func (l *Lib) Runtime() (Runtime, error) {
	if r := C.fk_init(l.syms["cuInit"]); r != 0 {
		return Runtime{}, fmt.Errorf("cudatest: cuInit: CUresult %d", int(r))
	}
	return Runtime{l}, nil
}

// RetainPrimary retains device ordinal's primary context and returns it.
func (r Runtime) RetainPrimary(ordinal int) (uintptr, error) {
	var ctx C.uintptr_t
	if res := C.fk_retain(r.l.syms["cuDeviceGet"], r.l.syms["cuDevicePrimaryCtxRetain"], C.int(ordinal), &ctx); res != 0 {
		return 0, fmt.Errorf("cudatest: cuDevicePrimaryCtxRetain(%d): CUresult %d", ordinal, int(res))
	}
	return uintptr(ctx), nil
}

// ReleasePrimary releases one retain of device ordinal's primary context.
func (r Runtime) ReleasePrimary(ordinal int) error {
	if res := C.fk_release(r.l.syms["cuDeviceGet"], r.l.syms["cuDevicePrimaryCtxRelease_v2"], C.int(ordinal)); res != 0 {
		return fmt.Errorf("cudatest: cuDevicePrimaryCtxRelease(%d): CUresult %d", ordinal, int(res))
	}
	return nil
}

// SetCurrent makes ctx current on the calling thread.
func (r Runtime) SetCurrent(ctx uintptr) error {
	if res := C.fk_setcur(r.l.syms["cuCtxSetCurrent"], C.uintptr_t(ctx)); res != 0 {
		return fmt.Errorf("cudatest: cuCtxSetCurrent: CUresult %d", int(res))
	}
	return nil
}

// Current returns the calling thread's current context, or 0.
func (r Runtime) Current() uintptr {
	return uintptr(C.fk_getcur(r.l.syms["cuCtxGetCurrent"]))
}

// NewStream creates a stream in the calling thread's current context and
// returns its handle, as cudaStreamCreate hands a cudaStream_t out.
func (r Runtime) NewStream() (uintptr, error) {
	var s C.uintptr_t
	if res := C.fk_screate(r.l.syms["cuStreamCreate"], &s); res != 0 {
		return 0, fmt.Errorf("cudatest: cuStreamCreate: CUresult %d", int(res))
	}
	return uintptr(s), nil
}

// DestroyStream destroys stream s and returns the CUresult: 400
// (CUDA_ERROR_INVALID_HANDLE) when s is no longer a live stream.
func (r Runtime) DestroyStream(s uintptr) int {
	return int(C.fk_sdestroy(r.l.syms["cuStreamDestroy_v2"], C.uintptr_t(s)))
}
