//go:build linux && cgo

package cudatest

/*
#include <stdint.h>
#include <stdlib.h>

typedef long long (*counter_fn)(const char *);
typedef long long (*uses_fn)(int);
typedef unsigned (*flags_fn)(const char *);
typedef int (*fail_fn)(const char *, int, long long, long long);
typedef void (*setvmm_fn)(int);
typedef int (*ptrdev_fn)(unsigned long long);
typedef long long (*live_fn)(int);
typedef int (*curdev_fn)(void);
typedef int (*failstream_fn)(int, void *, int);
typedef int (*poison_fn)(int, int);
typedef long long (*images_fn)(int);

static long long fk_counter(void *f, const char *n) { return ((counter_fn)f)(n); }
static long long fk_uses(void *f, int h) { return ((uses_fn)f)(h); }
static unsigned fk_flags(void *f, const char *n) { return ((flags_fn)f)(n); }
static int fk_fail(void *f, const char *n, int code, long long after, long long times) { return ((fail_fn)f)(n, code, after, times); }
static void fk_setvmm(void *f, int on) { ((setvmm_fn)f)(on); }
static int fk_ptrdev(void *f, unsigned long long p) { return ((ptrdev_fn)f)(p); }
static long long fk_live(void *f, int kind) { return ((live_fn)f)(kind); }
static int fk_curdev(void *f) { return ((curdev_fn)f)(); }
static int fk_failstream(void *f, int dev, void *s, int code) { return ((failstream_fn)f)(dev, s, code); }
static int fk_poison(void *f, int dev, int code) { return ((poison_fn)f)(dev, code); }
static long long fk_images(void *f, int library) { return ((images_fn)f)(library); }

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
	"testing"
	"unsafe"

	"github.com/accelkit/accelkit/driver/internal/cshared"
)

// Lib is one built instance of the fake. Its methods are safe for
// concurrent use (the fake's controls are); they reach this process's
// instance, which is the one a cgo caller in the same process loads from
// Path (dlopen returns the same handle), not the one a child process loads.
type Lib struct {
	Path    string // the shared library, for the DSN's lib= or ACCELKIT_LIBCUDA
	syms    map[string]unsafe.Pointer
	runtime map[string]unsafe.Pointer // foreign-runtime entry points; nil where omitted
}

// The fake's source, plain and (go test -asan only) with AddressSanitizer.
var (
	plain = &cshared.Source{
		Pkg: "cudatest", What: "the fake libcuda", File: "fakecuda", Lib: "libcuda-fake.so", Text: Source,
		CFlags: []string{"-O2"}, LDFlags: []string{"-lpthread"},
	}
	sanitized = &cshared.Source{
		Pkg: "cudatest", What: "the fake libcuda", File: "fakecuda", Lib: "libcuda-fake.so", Text: Source,
		CFlags: append([]string{"-O2"}, cshared.ASanFlags...), LDFlags: append([]string{"-lpthread"}, cshared.ASanFlags...),
	}
)

// controls are the fake's own entry points behind Lib's methods.
var controls = []string{"fake_counter", "fake_default_stream_uses", "fake_last_flags", "fake_fail", "fake_set_vmm",
	"fake_ptr_device", "fake_live", "fake_current_device", "fake_fail_stream", "fake_poison", "fake_live_images"}

// runtimeEntries are the CUDA entry points Runtime calls.
var runtimeEntries = []string{"cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
	"cuCtxSetCurrent", "cuCtxGetCurrent", "cuStreamCreate", "cuStreamDestroy_v2"}

// Build links a fresh instance of the fake into tb.TempDir() and returns
// it, loaded into this process. It skips tb when there is no C compiler
// and fails tb when building fails.
func Build(tb testing.TB) *Lib {
	tb.Helper()
	return BuildWith(tb, Options{})
}

// BuildWith is Build with options.
func BuildWith(tb testing.TB, o Options) *Lib {
	tb.Helper()
	src := plain
	if o.ASan && cshared.ASanFlags != nil {
		src = sanitized
	}
	path := src.Link(tb, o.Omit...)
	for k, v := range o.Env {
		tb.Setenv(k, v)
	}
	h := src.Load(tb, path)
	l := &Lib{Path: path, syms: h.Syms(tb, controls...), runtime: map[string]unsafe.Pointer{}}
	for _, name := range runtimeEntries {
		l.runtime[name] = h.Sym(name)
	}
	return l
}

// Counter returns how often an entry point was called ("cuMemAlloc_v2"),
// or an extra counter: "ctx_mismatch" (stream or event work issued while
// another context was current), "streams_without_non_blocking",
// "events_with_timing", "launch_library_kernel" and
// "launch_module_function" (launches of a cuLibraryGetKernel kernel, of a
// cuModuleGetFunction function), "launches_not_executed" (launches of
// kernels the fake does not run: all but the four reference kernels),
// "unload_before_sync" (unloads of a module launched since its context's
// last cuCtxSynchronize); -1 for a name the fake does not count.
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
func (l *Lib) LiveDeviceAllocations() int64 { return l.Live(LiveDevice) }

// Live counts the live regions of a kind (LiveDevice, ...).
func (l *Lib) Live(kind int) int64 {
	return int64(C.fk_live(l.syms["fake_live"], C.int(kind)))
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
		return fmt.Errorf("cudatest: no entry point %q", name)
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
		return fmt.Errorf("cudatest: FailStream: unknown device %d or stream %p", dev, s)
	}
	return nil
}

// Poison makes every later call in device dev's primary context return
// code, as after a fault of earlier work.
func (l *Lib) Poison(dev, code int) error {
	if C.fk_poison(l.syms["fake_poison"], C.int(dev), C.int(code)) != 0 {
		return fmt.Errorf("cudatest: Poison: unknown device %d", dev)
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

// Runtime calls the fake as a foreign CUDA runtime (PyTorch's, through
// libcudart) does, not through driver/cuda: it retains a device's primary
// context, makes it current on the calling thread and creates streams of
// its own. The thread-bound methods need a locked OS thread
// (runtime.LockOSThread).
type Runtime struct{ l *Lib }

// Runtime returns l's foreign-runtime view; it runs cuInit first. It fails
// when Options.Omit left out an entry point the view calls.
func (l *Lib) Runtime() (Runtime, error) {
	for _, name := range runtimeEntries {
		if l.runtime[name] == nil {
			return Runtime{}, fmt.Errorf("cudatest: Runtime: the fake libcuda was built without %s", name)
		}
	}
	if r := C.fk_init(l.runtime["cuInit"]); r != 0 {
		return Runtime{}, fmt.Errorf("cudatest: cuInit: CUresult %d", int(r))
	}
	return Runtime{l}, nil
}

// RetainPrimary retains device ordinal's primary context and returns it.
func (r Runtime) RetainPrimary(ordinal int) (uintptr, error) {
	var ctx C.uintptr_t
	if res := C.fk_retain(r.l.runtime["cuDeviceGet"], r.l.runtime["cuDevicePrimaryCtxRetain"], C.int(ordinal), &ctx); res != 0 {
		return 0, fmt.Errorf("cudatest: cuDevicePrimaryCtxRetain(%d): CUresult %d", ordinal, int(res))
	}
	return uintptr(ctx), nil
}

// ReleasePrimary releases one retain of device ordinal's primary context.
func (r Runtime) ReleasePrimary(ordinal int) error {
	if res := C.fk_release(r.l.runtime["cuDeviceGet"], r.l.runtime["cuDevicePrimaryCtxRelease_v2"], C.int(ordinal)); res != 0 {
		return fmt.Errorf("cudatest: cuDevicePrimaryCtxRelease(%d): CUresult %d", ordinal, int(res))
	}
	return nil
}

// SetCurrent makes ctx current on the calling thread.
func (r Runtime) SetCurrent(ctx uintptr) error {
	if res := C.fk_setcur(r.l.runtime["cuCtxSetCurrent"], C.uintptr_t(ctx)); res != 0 {
		return fmt.Errorf("cudatest: cuCtxSetCurrent: CUresult %d", int(res))
	}
	return nil
}

// Current returns the calling thread's current context, or 0.
func (r Runtime) Current() uintptr {
	return uintptr(C.fk_getcur(r.l.runtime["cuCtxGetCurrent"]))
}

// NewStream creates a stream in the calling thread's current context and
// returns its handle, as cudaStreamCreate hands a cudaStream_t out.
func (r Runtime) NewStream() (uintptr, error) {
	var s C.uintptr_t
	if res := C.fk_screate(r.l.runtime["cuStreamCreate"], &s); res != 0 {
		return 0, fmt.Errorf("cudatest: cuStreamCreate: CUresult %d", int(res))
	}
	return uintptr(s), nil
}

// DestroyStream destroys stream s and returns the CUresult: 400
// (CUDA_ERROR_INVALID_HANDLE) when s is no longer a live stream.
func (r Runtime) DestroyStream(s uintptr) int {
	return int(C.fk_sdestroy(r.l.runtime["cuStreamDestroy_v2"], C.uintptr_t(s)))
}
