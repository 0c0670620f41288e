//go:build linux && cgo

package cuda

/*
#include "shim.h"

// ak_keep_image keeps an image copy the driver may still read (its unload
// failed) reachable from a C global for the rest of the process: it is
// never freed, and leak checkers (go test -asan's LeakSanitizer) see it as
// held, not lost. Callers serialise through keptMu.
static void **ak_kept;
static size_t ak_nkept, ak_capkept;
static int ak_keep_image(void *p) {
	if (ak_nkept == ak_capkept) {
		size_t n = ak_capkept ? 2 * ak_capkept : 8;
		void **grown = realloc(ak_kept, n * sizeof *grown);
		if (grown == NULL) {
			return -1;
		}
		ak_kept = grown;
		ak_capkept = n;
	}
	ak_kept[ak_nkept++] = p;
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
)

// maxParams is the most arguments a launch takes: the shim builds the
// kernelParams array on the C stack (AK_MAX_PARAMS).
const maxParams = int(C.AK_MAX_PARAMS)

// jitLogSize is the JIT error log captured at load, in bytes.
const jitLogSize = 16 << 10

// launchOps is driver.Launcher for a device whose library has cuLaunchKernel
// and a loader: cuLibraryLoadData (CUDA 12.0, context-independent), else
// cuModuleLoadDataEx into the device's primary context.
type launchOps struct{ d *device }

// loader names the entry point that loads images.
func (d *device) loader() string {
	if d.drv.lib.library {
		return "cuLibraryLoadData"
	}
	return "cuModuleLoadDataEx"
}

// LoadModule loads image with the JIT error log captured: a load the
// driver refuses is an error carrying that log. The backend keeps a private
// NUL-terminated copy of image until Unload: the driver reads PTX as a C
// string, and CUDA does not say that it copies the image (with lazy
// loading, the default since CUDA 12.2, code is loaded at first use).
func (o launchOps) LoadModule(image []byte) (driver.Module, error) {
	d := o.d
	if err := d.state.Check("LoadModule"); err != nil {
		return nil, err
	}
	kind := driver.DetectImage(image)
	if kind == driver.ImageUnknown {
		return nil, fmt.Errorf("cuda device %d: LoadModule: %d bytes that are not a program image; want PTX text, a cubin (ELF) or a fatbin: %w",
			d.ordinal, len(image), driver.ErrInvalidImage)
	}
	cimg := C.malloc(C.size_t(len(image) + 1)) // cgo's malloc never returns nil
	copy(unsafe.Slice((*byte)(cimg), len(image)), image)
	*(*byte)(unsafe.Add(cimg, len(image))) = 0
	m := &module{d: d, library: d.drv.lib.library, image: cimg, kernels: map[string]*kernel{}}
	log := make([]byte, jitLogSize)
	var lib C.CUlibrary
	var mod C.CUmodule
	r := C.ak_load(d.l, d.ctx, cbool(m.library), cimg, (*C.char)(unsafe.Pointer(&log[0])), C.uint(len(log)), &lib, &mod)
	if r != 0 {
		C.free(cimg)
		e := d.drv.lib.error(d.loader(), int(r))
		if n := slices.Index(log, 0); n > 0 {
			e.Detail = "JIT log: " + string(log[:n])
		}
		if poisons(e.Code) {
			d.state.Lose(e)
		}
		return nil, fmt.Errorf("cuda device %d: LoadModule of a %s image (%d bytes): %w", d.ordinal, kind, len(image), e)
	}
	m.lib, m.mod = lib, mod
	d.modMu.Lock()
	closed := d.modClosed
	if !closed {
		d.modules[m] = struct{}{}
	}
	d.modMu.Unlock()
	if closed { // Close ran during the load: it ends every module
		m.unloaded = true
		return nil, errors.Join(d.state.Check("LoadModule"), m.release())
	}
	return m, nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// module is a loaded image: a CUlibrary (library) or a CUmodule of the
// device's primary context. Safe for concurrent use.
//
// Locking: mu's read lock is held across each launch of the module's
// kernels and each kernel lookup, and its write lock where Unload marks
// the module unloaded: a launch either enqueues before the unload waits for
// the device's work or sees unloaded, so no launch hands the driver a
// handle of an unloaded module. kmu guards kernels and is never held across
// a driver call. lib, mod and image are fixed at load.
type module struct {
	d       *device
	library bool
	lib     C.CUlibrary
	mod     C.CUmodule
	image   unsafe.Pointer // the private copy of the image, C memory

	mu       sync.RWMutex
	unloaded bool

	kmu     sync.Mutex
	kernels map[string]*kernel
}

func (m *module) unloadedError(op string) error {
	return fmt.Errorf("cuda device %d: %s: the module was unloaded: %w", m.d.ordinal, op, driver.ErrInvalidValue)
}

// Kernel looks name up once (cuLibraryGetKernel or cuModuleGetFunction)
// with its parameter info, and returns the same Kernel afterwards.
func (m *module) Kernel(name string) (driver.Kernel, error) {
	d := m.d
	if err := d.state.Check("Module.Kernel"); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.unloaded {
		return nil, m.unloadedError("Module.Kernel")
	}
	m.kmu.Lock()
	k, ok := m.kernels[name]
	m.kmu.Unlock()
	if ok {
		return k, nil
	}
	k, err := m.lookup(name)
	if err != nil {
		return nil, err
	}
	m.kmu.Lock()
	defer m.kmu.Unlock()
	if prev, ok := m.kernels[name]; ok {
		return prev, nil // a concurrent lookup won; both handles are the same kernel
	}
	m.kernels[name] = k
	return k, nil
}

func (m *module) lookup(name string) (*kernel, error) {
	d := m.d
	if name == "" || slices.Contains([]byte(name), 0) {
		return nil, fmt.Errorf("cuda device %d: Module.Kernel(%q): a kernel name is not empty and has no NUL byte: %w", d.ordinal, name, driver.ErrInvalidValue)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	op := "cuModuleGetFunction"
	if m.library {
		op = "cuLibraryGetKernel"
	}
	k := &kernel{m: m, name: name}
	if err := d.result(op, C.ak_get_kernel(d.l, d.ctx, m.lib, m.mod, cname, &k.f)); err != nil {
		return nil, fmt.Errorf("cuda device %d: Module.Kernel(%q): %w", d.ordinal, name, err)
	}
	offs := make([]C.uint, maxParams)
	sizes := make([]C.uint, maxParams)
	var n, known C.int
	op = "cuFuncGetParamInfo"
	if m.library {
		op = "cuKernelGetParamInfo"
	}
	if err := d.result(op, C.ak_param_info(d.l, d.ctx, cbool(m.library), k.f, &offs[0], &sizes[0], C.int(maxParams), &n, &known)); err != nil {
		return nil, fmt.Errorf("cuda device %d: Module.Kernel(%q): %w", d.ordinal, name, err)
	}
	if int(n) > maxParams {
		return nil, fmt.Errorf("cuda device %d: Module.Kernel(%q): the kernel has more than %d parameters, the most a launch passes: %w", d.ordinal, name, maxParams, driver.ErrNotSupported)
	}
	if known != 0 {
		k.paramsOK = true
		k.params = make([]driver.Param, n)
		for i := range k.params {
			k.params[i] = driver.Param{Offset: uint32(offs[i]), Size: uint32(sizes[i])}
		}
	}
	return k, nil
}

// Unload marks the module unloaded (later launches of its kernels fail
// with ErrInvalidValue), then waits for all work queued on the device
// (cuCtxSynchronize: CUDA does not document that an unload waits for
// queued launches, and the backend does not track which streams used
// which module) and unloads it. Idempotent.
func (m *module) Unload() error {
	m.mu.Lock()
	if m.unloaded {
		m.mu.Unlock()
		return nil
	}
	m.unloaded = true
	m.mu.Unlock()
	d := m.d
	d.modMu.Lock()
	delete(d.modules, m)
	d.modMu.Unlock()
	return m.release()
}

// release unloads the module from the driver and frees the image copy,
// which the driver may still read when the unload failed.
func (m *module) release() error {
	d := m.d
	op := "cuModuleUnload"
	if m.library {
		op = "cuLibraryUnload"
	}
	if err := d.result(op, C.ak_unload(d.l, d.ctx, m.lib, m.mod)); err != nil {
		var e *driver.Error
		if !errors.As(err, &e) || e.Op != "cuCtxSynchronize" {
			keepImage(m.image) // the driver may still read it
			return fmt.Errorf("cuda device %d: Module.Unload: %w", d.ordinal, err)
		}
		C.free(m.image) // unloaded; only the wait before failed
		return fmt.Errorf("cuda device %d: Module.Unload: unloaded, but waiting for the queued work failed: %w", d.ordinal, err)
	}
	C.free(m.image)
	return nil
}

// keptMu serialises ak_keep_image.
var keptMu sync.Mutex

// keepImage holds an image copy for the rest of the process.
func keepImage(p unsafe.Pointer) {
	keptMu.Lock()
	defer keptMu.Unlock()
	C.ak_keep_image(p) // on failure to grow, the copy stays allocated all the same
}

// unloadAll ends the live modules at Close and keeps later loads from
// registering.
func (d *device) unloadAll() error {
	d.modMu.Lock()
	d.modClosed = true
	live := make([]*module, 0, len(d.modules))
	for m := range d.modules {
		live = append(live, m)
	}
	clear(d.modules)
	d.modMu.Unlock()
	var errs []error
	for _, m := range live {
		m.mu.Lock()
		done := m.unloaded
		m.unloaded = true
		m.mu.Unlock()
		if done {
			continue
		}
		// On a lost device the wait before each unload fails: that loss
		// was reported already, and is no failure of Close.
		if err := m.release(); err != nil && !errors.Is(err, driver.ErrDeviceLost) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kernel is one function of a module: a CUkernel cast to CUfunction
// (library), which cuLaunchKernel takes as CUDA documents, or a
// CUfunction. Safe for concurrent use; fixed after lookup.
type kernel struct {
	m        *module
	name     string
	f        C.CUfunction
	params   []driver.Param
	paramsOK bool
}

func (k *kernel) Name() string { return k.name }

func (k *kernel) Params() ([]driver.Param, bool) { return slices.Clone(k.params), k.paramsOK }

// launchArgs are a checked launch's stream, dimensions and arguments as
// the shim takes them.
type launchArgs struct {
	st                             *stream
	gx, gy, gz, bx, by, bz, shared C.uint
	buf                            *C.uchar // args' packed values; nil without arguments
	offs                           *C.uint  // each argument's offset in buf
	n                              C.int
}

// prepare checks a launch of k (driver.CheckLaunch with the device's
// limits read at Open and the parameter info, where the driver gave it)
// and returns it as the shim takes it; op names the launch in errors
// ("launch", "RawLaunchLoop"), streamOp the call in a stream's. The buffer
// pointers point into args, which the caller keeps alive across the cgo
// call; it does not allocate.
func (k *kernel) prepare(op, streamOp string, s driver.Stream, cfg driver.LaunchConfig, args *driver.Args) (launchArgs, error) {
	d := k.m.d
	st, err := d.stream(s, streamOp)
	if err != nil {
		return launchArgs{}, err
	}
	if err := driver.CheckLaunch(k.name, cfg, args, k.params, k.paramsOK, d.maxBlock, d.maxShared); err != nil {
		return launchArgs{}, err
	}
	buf, offs, _ := args.Buffer()
	if len(offs) > maxParams {
		return launchArgs{}, fmt.Errorf("cuda device %d: %s of %s: %d arguments; a launch passes at most %d: %w", d.ordinal, op, k.name, len(offs), maxParams, driver.ErrInvalidValue)
	}
	g, b := cfg.Grid.Norm(), cfg.Block.Norm()
	a := launchArgs{st: st, gx: C.uint(g.X), gy: C.uint(g.Y), gz: C.uint(g.Z), bx: C.uint(b.X), by: C.uint(b.Y), bz: C.uint(b.Z),
		shared: C.uint(cfg.SharedMem), n: C.int(len(offs))}
	if len(offs) > 0 {
		a.buf = (*C.uchar)(unsafe.Pointer(unsafe.SliceData(buf)))
		a.offs = (*C.uint)(unsafe.Pointer(unsafe.SliceData(offs)))
	}
	return a, nil
}

// Launch checks cfg and args (prepare) and queues the kernel with one shim
// call, which builds the kernelParams array from args' packed buffer on
// the C stack. With a reused *Args it does not allocate.
func (k *kernel) Launch(s driver.Stream, cfg driver.LaunchConfig, args *driver.Args) error {
	d := k.m.d
	a, err := k.prepare("launch", "Kernel.Launch", s, cfg, args)
	if err != nil {
		return err
	}
	k.m.mu.RLock()
	if k.m.unloaded {
		k.m.mu.RUnlock()
		return k.m.unloadedError("launch of " + k.name)
	}
	r := C.ak_launch(d.l, d.ctx, k.f, a.gx, a.gy, a.gz, a.bx, a.by, a.bz, a.shared, a.st.h, a.buf, a.offs, a.n)
	k.m.mu.RUnlock()
	if r != 0 {
		return fmt.Errorf("cuda device %d: launch of %s (grid %s, block %s): %w", d.ordinal, k.name, cfg.Grid, cfg.Block, d.result("cuLaunchKernel", r))
	}
	return nil
}
