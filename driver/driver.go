package driver

import (
	"fmt"
)

// Ptr is a device virtual address. 0 is never a valid allocation, so it
// doubles as "no pointer": Malloc(0) returns it and Free(0) ignores it.
type Ptr uint64

// String formats p as a hexadecimal address.
func (p Ptr) String() string { return fmt.Sprintf("0x%x", uint64(p)) }

// Driver is an opened backend: a set of devices sharing one runtime.
// Implementations are safe for concurrent use.
type Driver interface {
	// Name is the registry name of the backend, such as "sim" or "cuda".
	Name() string
	// Version describes backend and driver, such as "cuda 13.0".
	Version() string
	// DeviceCount is the number of devices the backend exposes.
	DeviceCount() int
	// Device returns the device with the given ordinal, in [0, DeviceCount).
	Device(ordinal int) (Device, error)
	// Close releases the backend; later calls on it and its devices,
	// streams and events fail with ErrClosed. Close is idempotent: a
	// second call returns nil and does nothing.
	Close() error
}

// Device is one accelerator. Implementations are safe for concurrent use.
//
// A nil Stream argument means the device's default stream, everywhere (the
// copies, Memset, Event.Record, Peer.CopyPeer), as NULL does in CUDA;
// StreamOr resolves it.
//
// The asynchronous copies are ordered on their stream and read or write host
// memory when the stream reaches them, so their host slices must lie inside a
// live HostBuffer (ErrNotPinned otherwise): Go memory can move or die before
// the copy runs. The synchronous copies take any Go memory and wait for all
// work queued on the default stream first (they do not order against other
// streams).
type Device interface {
	Ordinal() int
	Name() string
	// MemInfo reports free and total device memory in bytes.
	MemInfo() (free, total uint64, err error)
	// Malloc allocates size bytes of device memory. Malloc(0) returns (0, nil).
	Malloc(size uint64) (Ptr, error)
	// Free releases memory from Malloc. Free(0) is a no-op; an unknown or
	// already freed pointer is ErrInvalidPointer.
	Free(p Ptr) error
	// HostAlloc allocates page-locked host memory outside the Go heap.
	// HostAlloc(0) returns an empty buffer without a driver call.
	HostAlloc(size int) (*HostBuffer, error)
	// HostFree releases a HostAlloc buffer; its Bytes must not be used after.
	HostFree(b *HostBuffer) error
	// DefaultStream is the device's legacy default stream.
	DefaultStream() Stream
	// NewStream creates a stream that does not synchronise with the default
	// stream.
	NewStream() (Stream, error)
	// NewEvent creates an event without timing data (cheaper to record).
	NewEvent() (Event, error)

	CopyHtoD(dst Ptr, src []byte, s Stream) error
	CopyDtoH(dst []byte, src Ptr, s Stream) error
	CopyDtoD(dst, src Ptr, n uint64, s Stream) error
	Memset(dst Ptr, v byte, n uint64, s Stream) error

	CopyHtoDSync(dst Ptr, src []byte) error
	CopyDtoHSync(dst []byte, src Ptr) error
	// Synchronize waits for all work on all streams of the device.
	Synchronize() error
}

// StreamOr returns s, or dev's default stream when s is nil: the nil-stream
// rule of Device, for code that needs the stream itself (to record an
// event on it, or to compare it with another).
func StreamOr(dev Device, s Stream) Stream {
	if s == nil {
		return dev.DefaultStream()
	}
	return s
}

// Stream is an ordered queue of device work. A failure of queued work is
// sticky: every later Query and Synchronize returns it. Stream values, like
// Device values, must be comparable (a backend's are pointers or structs
// of pointers): callers use == as a fast identity test before comparing
// (device ordinal, ID).
type Stream interface {
	Device() Device
	// ID is stable and unique among the streams of one device; the default
	// stream's ID is 0.
	ID() uint64
	// Query reports whether all queued work has finished; err is the
	// stream's sticky error, if any.
	Query() (done bool, err error)
	Synchronize() error
	// WaitEvent makes work queued on the stream after this call wait for e.
	WaitEvent(e Event) error
	// Destroy releases the stream after its queued work; the default stream
	// cannot be destroyed.
	Destroy() error
}

// Event marks a position in a stream's work.
type Event interface {
	Device() Device
	// Record captures the work queued on s so far (nil: the default
	// stream); Query and Synchronize then refer to that work. Recording
	// again moves the mark.
	Record(s Stream) error
	// Query reports whether the recorded work has finished. An event never
	// recorded is done. err is the sticky error of the recorded stream when
	// its work failed.
	Query() (done bool, err error)
	Synchronize() error
	Destroy() error
}

// HostBuffer is page-locked host memory of one device: a HostAlloc
// allocation, valid until HostFree, or a HostRegister registration of
// memory the caller owns, pinned until HostUnregister. Sub-slices of Bytes
// count as pinned for the async copies of that device meanwhile. A
// HostBuffer is created by a backend through NewHostBuffer.
type HostBuffer struct {
	mem   []byte
	dev   Device
	state any
}

// NewHostBuffer is for backends: it wraps mem, which the backend allocated
// and owns, with the backend's own bookkeeping in state.
func NewHostBuffer(dev Device, mem []byte, state any) *HostBuffer {
	return &HostBuffer{mem: mem, dev: dev, state: state}
}

// Bytes returns the buffer's memory: valid until HostFree for a HostAlloc
// buffer; for a registration, the caller's own memory, pinned until
// HostUnregister and ordinary memory after it.
func (b *HostBuffer) Bytes() []byte { return b.mem }

// Len is len(b.Bytes()).
func (b *HostBuffer) Len() int { return len(b.mem) }

// Device returns the device whose HostAlloc or HostRegister made the
// buffer.
func (b *HostBuffer) Device() Device { return b.dev }

// State returns the backend bookkeeping given to NewHostBuffer.
func (b *HostBuffer) State() any { return b.state }

// MemHandle names physical memory created by VMM.MemCreate.
type MemHandle uint64

// VMM is the optional virtual-memory-management capability used by
// expandable segments: reserve a virtual range, then map physical pages into
// it on demand. A backend offers it only where the device supports it.
// Sizes and offsets are multiples of Granularity.
type VMM interface {
	// Granularity is the page size of MemCreate and MemMap.
	Granularity() uint64
	AddressReserve(size, alignment uint64) (Ptr, error)
	AddressFree(p Ptr, size uint64) error
	MemCreate(size uint64) (MemHandle, error)
	MemRelease(h MemHandle) error
	// MemMap maps [offset, offset+size) of h at p.
	MemMap(p Ptr, size, offset uint64, h MemHandle) error
	MemUnmap(p Ptr, size uint64) error
	// SetAccess grants the device read-write access to a mapped range; a
	// mapped range is not usable before it.
	SetAccess(p Ptr, size uint64) error
}

// Peer is the optional peer-access capability between devices of one driver.
type Peer interface {
	CanAccessPeer(peer Device) (bool, error)
	// EnablePeerAccess lets this device access the peer's memory.
	EnablePeerAccess(peer Device) error
	// CopyPeer copies n bytes from src on srcDev to dst on this device,
	// ordered on s (a stream of this device; nil is its default stream).
	CopyPeer(dst Ptr, src Ptr, srcDev Device, n uint64, s Stream) error
}

// HostRegisterDevice is the optional capability of page-locking host
// memory the caller already has, in place (CUDA's cuMemHostRegister and
// cuMemHostUnregister), so that asynchronous copies move it by DMA without
// first copying it into a HostAlloc buffer. A backend offers it through
// backendkit.Compose.
//
// The memory stays the caller's; the registration borrows it. Go memory is
// pinned with a runtime.Pinner from HostRegister to HostUnregister, as cgo's
// rules require of memory whose address the driver keeps after the call,
// so the garbage collector neither moves nor frees it meanwhile (memory
// from outside the Go heap, such as an mmap, is taken as it is and must not
// be unmapped while registered). A registration is pinned memory of the
// device that made it only: other devices' async copies refuse it, as they
// refuse its HostAlloc buffers. Registrations are disjoint from each other,
// across all devices of the driver, and from HostAlloc buffers.
//
// Copies queued on a registration must have completed before
// HostUnregister, as before HostFree: the strict sim fails a copy that
// reaches the range after it (ErrNotPinned, sticky on its stream); cuda
// waits for the device's queued work first, so that no transfer touches
// memory the garbage collector may reuse. Driver.Close ends every
// registration still live (the memory stays valid: it is the caller's).
type HostRegisterDevice interface {
	// HostRegister page-locks mem in place and returns a HostBuffer over exactly mem:
	// its sub-slices then count as pinned for the async copies, like a HostAlloc buffer's.
	// Empty mem is ErrInvalidValue; a range overlapping a live registration
	// or a HostAlloc buffer is ErrAlreadyRegistered; after Driver.Close,
	// ErrClosed.
	HostRegister(mem []byte) (*HostBuffer, error)
	// HostUnregister undoes HostRegister; b's memory is ordinary memory again.
	// A buffer that is not a live registration of this device (a HostAlloc
	// buffer, one unregistered already) is ErrNotRegistered; nil is
	// ErrInvalidValue; after Driver.Close, ErrClosed. HostFree of a
	// registration is ErrInvalidPointer.
	HostUnregister(b *HostBuffer) error
}

// Properties describes a device for tools such as accinfo.
type Properties struct {
	Name              string
	TotalMemory       uint64
	ComputeCapability string // "9.0" on CUDA; empty where it does not apply
	MultiProcessors   int
	Simulated         bool              // true for sim: figures are not a GPU's
	Attributes        map[string]string // backend-specific facts, printed sorted
}

// PropertiesDevice is the optional capability of describing a device.
type PropertiesDevice interface {
	Properties() (Properties, error)
}

// AsVMM returns d's VMM capability, if it offers one. A backend offers it
// through backendkit.Compose.
func AsVMM(d Device) (VMM, bool) { v, ok := d.(VMM); return v, ok }

// AsPeer returns d's peer capability, if it offers one.
func AsPeer(d Device) (Peer, bool) { p, ok := d.(Peer); return p, ok }

// AsHostRegister returns d's HostRegisterDevice capability, if it offers one.
func AsHostRegister(d Device) (HostRegisterDevice, bool) {
	h, ok := d.(HostRegisterDevice)
	return h, ok
}
