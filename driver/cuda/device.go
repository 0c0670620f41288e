//go:build linux && cgo

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/backendkit"
)

// Device attributes read at Open (cuda.h CUdevice_attribute).
const (
	attrMaxThreadsPerBlock    = 1 // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	attrMaxSharedPerBlock     = 8 // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK
	attrMultiprocessorCount   = 16
	attrComputeCapMajor       = 75
	attrComputeCapMinor       = 76
	attrHostRegisterSupported = 99  // CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED
	attrVirtualMemoryManaged  = 102 // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
)

// device is one CUDA device and its primary context.
//
// Locking: allocMu guards allocs (live Malloc pointers and sizes); pinMu
// guards pins (live HostAlloc and HostRegister ranges, sorted by base);
// the driver's regMu guards regs (the live registrations) and serialises
// the registration calls. allocMu and pinMu are never held across a
// driver call except pinMu's read lock, never both at once; regMu is held
// across the registration calls and taken before pinMu. state and the
// stream counter are atomic; the rest is fixed at Open. Safe for
// concurrent use.
type device struct {
	drv     *cudaDriver
	l       *C.ak_lib
	ordinal int
	cu      C.CUdevice
	ctx     C.CUcontext
	// state names the device in errors ("cuda device N"), holds what
	// Driver.Device hands out (backendkit.Compose of d and its capabilities)
	// and whether the device is live, lost (a context-poisoning error,
	// sticky) or closed.
	state backendkit.DeviceState

	name        string
	total       uint64
	ccMajor     int
	ccMinor     int
	sms         int
	vmmAttr     bool   // the device reports VMM support
	granularity uint64 // > 0 when VMM is offered
	vmmReason   string // why VMM is not offered
	peer        bool
	hostReg     bool   // host registration is offered
	hostRegWhy  string // why host registration is not offered
	launcher    bool   // the launch capability is offered
	launchWhy   string // why it is not
	maxBlock    uint64 // threads per block
	maxShared   uint32 // dynamic shared memory per block, bytes

	modMu     sync.Mutex
	modules   map[*module]struct{} // live modules, guarded by modMu; unloaded at Close
	modClosed bool                 // Close has unloaded them; guarded by modMu

	defStream  *stream
	nextStream atomic.Uint64

	allocMu sync.Mutex
	allocs  map[driver.Ptr]uint64

	pinMu sync.RWMutex
	pins  []pinRange

	regs map[*hostMem]struct{} // guarded by drv.regMu
}

// pinRange is a live HostAlloc allocation or HostRegister registration.
type pinRange struct {
	base, end uintptr
	reg       bool // a registration
}

// hostMem is the backend state of a HostBuffer (HostAlloc(0)'s empty
// buffers are backendkit.DeviceState's, and the buffer's Device names its
// device): a HostAlloc allocation, or a HostRegister registration of the
// caller's memory.
//
// Locking: freed is atomic; pin is used under the driver's regMu; the rest
// is fixed at HostAlloc or HostRegister.
type hostMem struct {
	base       unsafe.Pointer
	size       int
	freed      atomic.Bool    // HostAlloc: HostFree ran
	registered bool           // a registration, ended by HostUnregister
	pin        runtime.Pinner // registered: keeps the caller's Go memory in place
}

// cudaDevicer is the *device behind a device this backend hands out (or
// behind a test's wrapper of it, which embeds *device).
type cudaDevicer interface{ cudaDevice() *device }

func (d *device) cudaDevice() *device { return d }

// asDevice returns the *device behind dev, unwrapping backendkit.Compose
// wrappers, or nil when dev is not a device of this backend.
func asDevice(dev driver.Device) *device {
	for dev != nil {
		if c, ok := dev.(cudaDevicer); ok {
			return c.cudaDevice()
		}
		dev = backendkit.Unwrap(dev)
	}
	return nil
}

func newDevice(drv *cudaDriver, ordinal int) (*device, error) {
	l := drv.lib
	d := &device{drv: drv, l: l.c, ordinal: ordinal, allocs: map[driver.Ptr]uint64{}, regs: map[*hostMem]struct{}{}, modules: map[*module]struct{}{}}
	d.state.Who = "cuda device " + strconv.Itoa(ordinal)
	fail := func(op string, r C.CUresult) error {
		return fmt.Errorf("cuda: device %d: %w", ordinal, l.error(op, int(r)))
	}
	if r := C.ak_device_get(l.c, C.int(ordinal), &d.cu); r != 0 {
		return nil, fail("cuDeviceGet", r)
	}
	var name [256]C.char
	if r := C.ak_device_name(l.c, d.cu, &name[0], C.int(len(name))); r != 0 {
		return nil, fail("cuDeviceGetName", r)
	}
	d.name = C.GoString(&name[0])
	var total C.size_t
	if r := C.ak_device_total(l.c, d.cu, &total); r != 0 {
		return nil, fail("cuDeviceTotalMem_v2", r)
	}
	d.total = uint64(total)
	for _, a := range []struct {
		attr int
		dst  *int
	}{{attrComputeCapMajor, &d.ccMajor}, {attrComputeCapMinor, &d.ccMinor}, {attrMultiprocessorCount, &d.sms}} {
		var v C.int
		if r := C.ak_device_attr(l.c, d.cu, C.int(a.attr), &v); r != 0 {
			return nil, fail("cuDeviceGetAttribute", r)
		}
		*a.dst = int(v)
	}
	var vmm C.int
	if r := C.ak_device_attr(l.c, d.cu, attrVirtualMemoryManaged, &vmm); r != 0 {
		return nil, fail("cuDeviceGetAttribute", r)
	}
	d.vmmAttr = vmm == 1
	switch {
	case !l.vmm:
		d.vmmReason = "driver library lacks VMM entry points"
	case !d.vmmAttr:
		d.vmmReason = "device reports no VMM support"
	default:
		var g C.size_t
		if r := C.ak_granularity(l.c, d.cu, &g); r != 0 || g == 0 {
			d.vmmReason = "cuMemGetAllocationGranularity failed: " + l.error("cuMemGetAllocationGranularity", int(r)).Error()
		} else {
			d.granularity = uint64(g)
		}
	}
	d.peer = l.peer
	switch {
	case !l.hostReg:
		d.hostRegWhy = "driver library lacks cuMemHostRegister_v2 or cuMemHostUnregister"
	default:
		var hr C.int
		if r := C.ak_device_attr(l.c, d.cu, attrHostRegisterSupported, &hr); r != 0 {
			return nil, fail("cuDeviceGetAttribute", r)
		}
		d.hostReg = hr == 1
		if !d.hostReg {
			d.hostRegWhy = "device reports no host registration support (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED is 0)"
		}
	}
	switch {
	case !l.launch:
		d.launchWhy = "driver library lacks cuLaunchKernel"
	case !l.library && !l.module:
		d.launchWhy = "driver library has neither cuLibraryLoadData, cuLibraryGetKernel and cuLibraryUnload nor cuModuleLoadDataEx, cuModuleGetFunction and cuModuleUnload"
	default:
		var block, shared C.int
		if r := C.ak_device_attr(l.c, d.cu, attrMaxThreadsPerBlock, &block); r != 0 {
			return nil, fail("cuDeviceGetAttribute", r)
		}
		if r := C.ak_device_attr(l.c, d.cu, attrMaxSharedPerBlock, &shared); r != 0 {
			return nil, fail("cuDeviceGetAttribute", r)
		}
		d.launcher = true
		d.maxBlock, d.maxShared = uint64(max(block, 0)), uint32(max(shared, 0))
	}
	if r := C.ak_retain(l.c, d.cu, &d.ctx); r != 0 {
		return nil, fail("cuDevicePrimaryCtxRetain", r)
	}
	d.defStream = &stream{dev: d} // the legacy default stream: handle 0, ID 0
	d.state.Public = backendkit.Compose(d, d.capabilities())
	return d, nil
}

// capabilities are the optional interfaces d offers: a device without VMM
// support must not satisfy driver.VMM at all, so the capabilities live in
// their own types (vmmOps, peerOps, hostRegOps, launchOps) and backendkit.Compose adds
// only those the library and device support.
func (d *device) capabilities() backendkit.Capabilities {
	caps := backendkit.Capabilities{Properties: d}
	if d.granularity > 0 {
		caps.VMM = vmmOps{d}
	}
	if d.peer {
		caps.Peer = peerOps{d}
	}
	if d.hostReg {
		caps.HostRegister = hostRegOps{d}
	}
	if d.launcher {
		caps.Launcher = launchOps{d}
	}
	return caps
}

// result turns the CUresult of op into an error. A context-poisoning code
// marks the device lost for good.
func (d *device) result(op string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	e := d.drv.lib.error(op, int(r))
	if poisons(e.Code) {
		d.state.Lose(e)
	}
	return e
}

func (d *device) Ordinal() int { return d.ordinal }
func (d *device) Name() string { return d.name }

func (d *device) MemInfo() (free, total uint64, err error) {
	if err := d.state.Check("MemInfo"); err != nil {
		return 0, 0, err
	}
	var f, t C.size_t
	if err := d.result("cuMemGetInfo_v2", C.ak_mem_info(d.l, d.ctx, &f, &t)); err != nil {
		return 0, 0, err
	}
	return uint64(f), uint64(t), nil
}

func (d *device) Malloc(size uint64) (driver.Ptr, error) {
	if err := d.state.Check("Malloc"); err != nil {
		return 0, err
	}
	if size == 0 {
		return 0, nil
	}
	res := C.ak_malloc(d.l, d.ctx, C.size_t(size))
	if err := d.result("cuMemAlloc_v2", res.r); err != nil {
		return 0, err
	}
	p := res.p
	d.allocMu.Lock()
	d.allocs[driver.Ptr(p)] = size
	d.allocMu.Unlock()
	return driver.Ptr(p), nil
}

// Free releases p. Unknown pointers and double frees are caught here, from
// the set of live allocations, without a driver call: CUDA's answer to them
// ranges from an error to a poisoned context.
func (d *device) Free(p driver.Ptr) error {
	if err := d.state.Check("Free"); err != nil {
		return err
	}
	if p == 0 {
		return nil
	}
	d.allocMu.Lock()
	size, ok := d.allocs[p]
	delete(d.allocs, p)
	d.allocMu.Unlock()
	if !ok {
		return d.state.UnknownPointerError(p)
	}
	if err := d.result("cuMemFree_v2", C.ak_free(d.l, d.ctx, C.CUdeviceptr(p))); err != nil {
		d.allocMu.Lock()
		d.allocs[p] = size
		d.allocMu.Unlock()
		return err
	}
	return nil
}

func (d *device) HostAlloc(size int) (*driver.HostBuffer, error) {
	if b, err := d.state.CheckHostAlloc(size); b != nil || err != nil {
		return b, err
	}
	var p unsafe.Pointer
	if err := d.result("cuMemHostAlloc", C.ak_host_alloc(d.l, d.ctx, C.size_t(size), &p)); err != nil {
		return nil, err
	}
	d.addPin(pinRange{base: uintptr(p), end: uintptr(p) + uintptr(size)})
	return driver.NewHostBuffer(d.state.Public, unsafe.Slice((*byte)(p), size), &hostMem{base: p, size: size}), nil
}

// HostFree frees a HostAlloc buffer; a registration is HostUnregister's.
func (d *device) HostFree(b *driver.HostBuffer) error {
	hm, ok, err := backendkit.HostBufferState[*hostMem](&d.state, b)
	if !ok {
		return err
	}
	if hm.registered {
		return d.state.RegisteredFreeError(b)
	}
	if !hm.freed.CompareAndSwap(false, true) {
		return d.state.HostFreedError(hm.size)
	}
	d.dropPin(uintptr(hm.base))
	return d.result("cuMemFreeHost", C.ak_host_free(d.l, d.ctx, hm.base))
}

// addPin inserts r into pins.
func (d *device) addPin(r pinRange) {
	d.pinMu.Lock()
	i, _ := slices.BinarySearchFunc(d.pins, r.base, func(r pinRange, b uintptr) int { return cmp.Compare(r.base, b) })
	d.pins = slices.Insert(d.pins, i, r)
	d.pinMu.Unlock()
}

// dropPin removes the range starting at base from pins.
func (d *device) dropPin(base uintptr) {
	d.pinMu.Lock()
	if i, found := slices.BinarySearchFunc(d.pins, base, func(r pinRange, b uintptr) int { return cmp.Compare(r.base, b) }); found {
		d.pins = slices.Delete(d.pins, i, i+1)
	}
	d.pinMu.Unlock()
}

// pinOverlap returns a range of pins that overlaps [p, end), if any. The
// ranges are disjoint and sorted by base, so their ends are sorted too:
// only the last one starting below end can reach p.
func (d *device) pinOverlap(p, end uintptr) (pinRange, bool) {
	d.pinMu.RLock()
	defer d.pinMu.RUnlock()
	i, _ := slices.BinarySearchFunc(d.pins, end, func(r pinRange, e uintptr) int {
		if r.base < e {
			return -1
		}
		return 1
	})
	if i > 0 && d.pins[i-1].end > p {
		return d.pins[i-1], true
	}
	return pinRange{}, false
}

// pinned reports whether b lies inside one live HostAlloc buffer of d.
func (d *device) pinned(b []byte) bool {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := p + uintptr(len(b))
	d.pinMu.RLock()
	defer d.pinMu.RUnlock()
	i, found := slices.BinarySearchFunc(d.pins, p, func(r pinRange, b uintptr) int { return cmp.Compare(r.base, b) })
	if !found {
		i-- // the last range starting below p
	}
	return i >= 0 && p >= d.pins[i].base && end <= d.pins[i].end
}

// stream resolves s to a live stream of d; nil means the default stream
// (driver.StreamOr).
func (d *device) stream(s driver.Stream, op string) (*stream, error) {
	st, ok := driver.StreamOr(d.state.Public, s).(*stream)
	if err := d.state.CheckStream(op, s, ok && st != nil && st.dev == d); err != nil {
		return nil, err
	}
	if st.destroyed.Load() {
		return nil, st.destroyedError(op)
	}
	return st, nil
}

func (d *device) DefaultStream() driver.Stream { return d.defStream }

func (d *device) NewStream() (driver.Stream, error) {
	if err := d.state.Check("NewStream"); err != nil {
		return nil, err
	}
	var h C.CUstream
	if err := d.result("cuStreamCreate", C.ak_stream_create(d.l, d.ctx, &h)); err != nil {
		return nil, err
	}
	return &stream{dev: d, h: h, id: d.nextStream.Add(1)}, nil
}

func (d *device) NewEvent() (driver.Event, error) {
	if err := d.state.Check("NewEvent"); err != nil {
		return nil, err
	}
	var h C.CUevent
	if err := d.result("cuEventCreate", C.ak_event_create(d.l, d.ctx, &h)); err != nil {
		return nil, err
	}
	return &event{dev: d, h: h}, nil
}

func (d *device) CopyHtoD(dst driver.Ptr, src []byte, s driver.Stream) error {
	st, err := d.stream(s, "CopyHtoD")
	if err != nil || len(src) == 0 {
		return err
	}
	if !d.pinned(src) {
		return d.state.NotPinnedError("CopyHtoD", src)
	}
	return d.result("cuMemcpyHtoDAsync_v2", C.ak_htod_async(d.l, d.ctx, C.CUdeviceptr(dst),
		unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)), st.h))
}

func (d *device) CopyDtoH(dst []byte, src driver.Ptr, s driver.Stream) error {
	st, err := d.stream(s, "CopyDtoH")
	if err != nil || len(dst) == 0 {
		return err
	}
	if !d.pinned(dst) {
		return d.state.NotPinnedError("CopyDtoH", dst)
	}
	return d.result("cuMemcpyDtoHAsync_v2", C.ak_dtoh_async(d.l, d.ctx,
		unsafe.Pointer(unsafe.SliceData(dst)), C.CUdeviceptr(src), C.size_t(len(dst)), st.h))
}

func (d *device) CopyDtoD(dst, src driver.Ptr, n uint64, s driver.Stream) error {
	st, err := d.stream(s, "CopyDtoD")
	if err != nil || n == 0 {
		return err
	}
	return d.result("cuMemcpyDtoDAsync_v2", C.ak_dtod_async(d.l, d.ctx, C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), st.h))
}

func (d *device) Memset(dst driver.Ptr, v byte, n uint64, s driver.Stream) error {
	st, err := d.stream(s, "Memset")
	if err != nil || n == 0 {
		return err
	}
	return d.result("cuMemsetD8Async", C.ak_memset_async(d.l, d.ctx, C.CUdeviceptr(dst), C.uchar(v), C.size_t(n), st.h))
}

// CopyHtoDSync copies from any memory. The copy is ordered after the work
// on the legacy default stream and complete when it returns: the shim
// synchronizes the default stream after cuMemcpyHtoD_v2, which may return
// as soon as pageable data is staged. src is only used during the call.
func (d *device) CopyHtoDSync(dst driver.Ptr, src []byte) error {
	if err := d.state.Check("CopyHtoDSync"); err != nil || len(src) == 0 {
		return err
	}
	return d.result("cuMemcpyHtoD_v2", C.ak_htod_sync(d.l, d.ctx, C.CUdeviceptr(dst),
		unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src))))
}

// CopyDtoHSync copies to any memory after the work on the legacy default
// stream; cuMemcpyDtoH_v2 returns when the data has arrived.
func (d *device) CopyDtoHSync(dst []byte, src driver.Ptr) error {
	if err := d.state.Check("CopyDtoHSync"); err != nil || len(dst) == 0 {
		return err
	}
	return d.result("cuMemcpyDtoH_v2", C.ak_dtoh_sync(d.l, d.ctx,
		unsafe.Pointer(unsafe.SliceData(dst)), C.CUdeviceptr(src), C.size_t(len(dst))))
}

// Synchronize waits for all work of the device's primary context.
func (d *device) Synchronize() error {
	if err := d.state.Check("Synchronize"); err != nil {
		return err
	}
	return d.result("cuCtxSynchronize", C.ak_ctx_sync(d.l, d.ctx))
}

// Properties describes the device; Attributes carry the driver version,
// the library path, and whether VMM, peer access and host registration
// are offered, and why not.
func (d *device) Properties() (driver.Properties, error) {
	if err := d.state.Check("Properties"); err != nil {
		return driver.Properties{}, err
	}
	attrs := map[string]string{
		"driver_version": d.drv.lib.versionString(),
		"library":        d.drv.lib.path,
		"vmm":            strconv.FormatBool(d.granularity > 0),
		"peer":           strconv.FormatBool(d.peer),
		"hostregister":   strconv.FormatBool(d.hostReg),
		"launcher":       strconv.FormatBool(d.launcher),
	}
	if d.launcher {
		attrs["loader"] = d.loader()
	} else {
		attrs["launcher_off_because"] = d.launchWhy
	}
	if d.granularity > 0 {
		attrs["vmm_granularity"] = strconv.FormatUint(d.granularity, 10)
	} else {
		attrs["vmm_off_because"] = d.vmmReason
	}
	if !d.hostReg {
		attrs["hostregister_off_because"] = d.hostRegWhy
	}
	if len(d.drv.lib.missing) > 0 {
		attrs["missing_entry_points"] = fmt.Sprint(d.drv.lib.missing)
	}
	return driver.Properties{
		Name:              d.name,
		TotalMemory:       d.total,
		ComputeCapability: fmt.Sprintf("%d.%d", d.ccMajor, d.ccMinor),
		MultiProcessors:   d.sms,
		Attributes:        attrs,
	}, nil
}

// ctxCheck is one shim call that only makes the context current: the
// shim's fixed cost per operation, for the benchmarks.
func (d *device) ctxCheck() error {
	return d.result("cuCtxGetCurrent", C.ak_ctx_check(d.l, d.ctx))
}
