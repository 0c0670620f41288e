package backendkit

import (
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
)

// DeviceState is what every call on a backend's device checks first, kept
// once for every backend: how the device's errors name it, the value the
// backend hands out, and whether the device still takes calls (live, lost,
// or its driver closed). Its methods and the functions taking it are the
// contract checks, so that the same misuse is refused the same way, with
// the same message, on every backend: each says what was wrong and what
// is valid, and wraps the sentinel the conformance suite (drivertest)
// expects. A backend keeps one DeviceState per device.
//
// Its methods, and the functions taking it, are safe for concurrent use
// by multiple goroutines.
type DeviceState struct {
	// Locking: none. Who and Public are set before the device is handed out
	// and never change; the lifecycle is one atomic pointer that only
	// advances (live, then lost, then closed).

	// Who names the device at the start of its errors: "sim device 0".
	Who string
	// Public is the value the backend hands out for the device (from
	// Compose); buffers and streams of the device report it.
	Public driver.Device

	end atomic.Pointer[deviceEnd] // nil while live
}

// deviceEnd is why a device takes no more calls.
type deviceEnd struct {
	closed bool  // its driver was closed
	lost   error // else: the loss, wrapping ErrDeviceLost
}

// Check returns why the device cannot run op: driver.ErrClosed after its driver
// closed, the loss (driver.ErrDeviceLost) after Lose, else nil.
func (s *DeviceState) Check(op string) error {
	if s.end.Load() != nil { // kept small to inline: every call begins here
		return s.endError(op)
	}
	return nil
}

// endError is Check's error for a device that has ended. The end only
// advances, so reading it again gives the latest.
func (s *DeviceState) endError(op string) error {
	e := s.end.Load()
	if e.closed {
		return ClosedError(s.Who, op)
	}
	return fmt.Errorf("%s: %s: %w", s.Who, op, e.lost)
}

// Live reports whether the device takes calls: neither lost nor closed.
func (s *DeviceState) Live() bool { return s.end.Load() == nil }

// Lose marks the live device lost: every later Check returns err, which
// should wrap driver.ErrDeviceLost. It reports whether this call lost the device;
// the first loss is the one kept, and a closed device stays closed.
func (s *DeviceState) Lose(err error) bool {
	return s.end.CompareAndSwap(nil, &deviceEnd{lost: err})
}

// Close marks the device closed, lost or not: every later Check returns
// driver.ErrClosed. It reports whether this call closed it.
func (s *DeviceState) Close() bool {
	closed := &deviceEnd{closed: true}
	for {
		e := s.end.Load()
		if e != nil && e.closed {
			return false
		}
		if s.end.CompareAndSwap(e, closed) {
			return true
		}
	}
}

// CheckHostAlloc begins HostAlloc(size): the device's Check, then the size.
// For size 0 it returns the empty buffer HostAlloc returns without a
// driver call (HostBufferState frees it again); for size > 0 it returns
// (nil, nil) and the backend allocates.
func (s *DeviceState) CheckHostAlloc(size int) (*driver.HostBuffer, error) {
	if err := s.Check("HostAlloc"); err != nil {
		return nil, err
	}
	switch {
	case size < 0:
		return nil, fmt.Errorf("%s: HostAlloc(%d): size must be >= 0: %w", s.Who, size, driver.ErrInvalidValue)
	case size == 0:
		return driver.NewHostBuffer(s.Public, []byte{}, new(emptyHost)), nil
	}
	return nil, nil
}

// emptyHost is the state of an empty buffer from CheckHostAlloc.
type emptyHost struct{ freed atomic.Bool }

// HostBufferState begins HostFree(b) on the device of s: the device's
// Check, then b. It returns the bookkeeping the backend gave driver.NewHostBuffer
// and ok; when ok is false the backend returns err, which is nil when b
// was an empty buffer of CheckHostAlloc, freed here. nil is
// driver.ErrInvalidValue; a buffer of another device or backend (its state not a
// T) and a second HostFree of an empty buffer are driver.ErrInvalidPointer.
// Whether a backend's own buffer was freed already is the backend's to
// check (HostFreedError).
func HostBufferState[T any](s *DeviceState, b *driver.HostBuffer) (state T, ok bool, err error) {
	if err := s.Check("HostFree"); err != nil {
		return state, false, err
	}
	if b == nil {
		return state, false, fmt.Errorf("%s: HostFree(nil): %w", s.Who, driver.ErrInvalidValue)
	}
	if b.Device() == s.Public {
		if e, empty := b.State().(*emptyHost); empty {
			if !e.freed.CompareAndSwap(false, true) {
				return state, false, s.HostFreedError(0)
			}
			return state, false, nil
		}
	}
	if state, ok = ownState[T](s, b); ok {
		return state, true, nil
	}
	return state, false, fmt.Errorf("%s: HostFree: buffer was not allocated by this device's HostAlloc: %w", s.Who, driver.ErrInvalidPointer)
}

// ownState returns b's backend bookkeeping when b is a buffer of the
// device of s whose state is a T.
func ownState[T any](s *DeviceState, b *driver.HostBuffer) (state T, ok bool) {
	if b.Device() != s.Public {
		return state, false
	}
	state, ok = b.State().(T)
	return state, ok
}

// CheckHostRegister begins HostRegister(mem): the device's Check, then mem,
// which must hold at least one byte.
func (s *DeviceState) CheckHostRegister(mem []byte) error {
	if err := s.Check("HostRegister"); err != nil {
		return err
	}
	if len(mem) == 0 {
		return fmt.Errorf("%s: HostRegister: empty memory (len 0): register at least 1 byte: %w", s.Who, driver.ErrInvalidValue)
	}
	return nil
}

// RegisterOverlapError is the error of HostRegister(mem) when mem overlaps
// [base, end), host memory page-locked already; what names it, such as
// "a HostAlloc buffer of this device" or "a registration of sim device 1".
func (s *DeviceState) RegisterOverlapError(mem []byte, base, end uintptr, what string) error {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	return fmt.Errorf("%s: HostRegister: [%#x, %#x) (%d bytes) overlaps %s at [%#x, %#x); registrations must be disjoint from each other and from HostAlloc buffers (HostUnregister that one first): %w",
		s.Who, p, p+uintptr(len(mem)), len(mem), what, base, end, driver.ErrAlreadyRegistered)
}

// HostRegistrationState begins HostUnregister(b) on the device of s: the
// device's Check, then b. It returns the bookkeeping the backend gave
// driver.NewHostBuffer and ok; when ok is false the backend returns err. nil is
// driver.ErrInvalidValue; a buffer of another device or backend, or an empty
// HostAlloc(0) buffer (its state not a T), is driver.ErrNotRegistered. Whether
// the state is a live registration, not one of the backend's HostAlloc
// buffers nor one unregistered already, is the backend's to check
// (NotRegisteredError).
func HostRegistrationState[T any](s *DeviceState, b *driver.HostBuffer) (state T, ok bool, err error) {
	if err := s.Check("HostUnregister"); err != nil {
		return state, false, err
	}
	if b == nil {
		return state, false, fmt.Errorf("%s: HostUnregister(nil): %w", s.Who, driver.ErrInvalidValue)
	}
	if state, ok = ownState[T](s, b); ok {
		return state, true, nil
	}
	return state, false, s.NotRegisteredError(b, "was not made by this device's HostRegister")
}

// NotRegisteredError is the error of HostUnregister(b) when b is not a
// live registration of the device; why says what it is instead, such as
// "is a HostAlloc buffer (release it with HostFree)".
func (s *DeviceState) NotRegisteredError(b *driver.HostBuffer, why string) error {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes())))
	return fmt.Errorf("%s: HostUnregister: buffer [%#x, %#x) (%d bytes) %s; HostUnregister takes a live buffer from this device's HostRegister: %w",
		s.Who, p, p+uintptr(b.Len()), b.Len(), why, driver.ErrNotRegistered)
}

// RegisteredFreeError is the error of HostFree(b) when b is a HostRegister
// registration, whose memory the caller owns.
func (s *DeviceState) RegisteredFreeError(b *driver.HostBuffer) error {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes())))
	return fmt.Errorf("%s: HostFree: buffer [%#x, %#x) (%d bytes) is a HostRegister registration, not a HostAlloc buffer; release it with HostUnregister: %w",
		s.Who, p, p+uintptr(b.Len()), b.Len(), driver.ErrInvalidPointer)
}

// HostFreedError is the error of HostFree on a buffer of size bytes that
// was already freed.
func (s *DeviceState) HostFreedError(size int) error {
	return fmt.Errorf("%s: HostFree: buffer of %d bytes already freed: %w", s.Who, size, driver.ErrInvalidPointer)
}

// CheckStream begins a call (op) that takes a stream st: the device's
// Check, then whether st is one of the device's own streams. The backend
// resolves st first, with driver.StreamOr (nil is the device's default stream)
// and a type assertion to its stream type, and passes as own whether that
// gave a non-nil stream of this device; a stream that is not is
// driver.ErrInvalidValue. Whether the stream was destroyed is the backend's to
// check (DestroyedError).
//
// The resolution stays with the backend because it is on every copy's
// path: a generic one costs an indirect call per use.
func (s *DeviceState) CheckStream(op string, st driver.Stream, own bool) error {
	if s.end.Load() != nil || !own { // kept small to inline, as Check
		return s.streamError(op, st)
	}
	return nil
}

// streamError is CheckStream's error: the device's, else a foreign stream.
func (s *DeviceState) streamError(op string, st driver.Stream) error {
	if err := s.Check(op); err != nil {
		return err
	}
	return fmt.Errorf("%s: %s: stream %T is not a stream of this device: %w", s.Who, op, st, driver.ErrInvalidValue)
}

// UnknownPointerError is the error of Free(p) when p is not a live Malloc
// allocation of the device.
func (s *DeviceState) UnknownPointerError(p driver.Ptr) error {
	return fmt.Errorf("%s: Free(%v): not a live allocation of this device (never allocated here, or already freed): %w", s.Who, p, driver.ErrInvalidPointer)
}

// DestroyedError is the error of op on an object after its Destroy; what
// names it, such as "stream 3" or "event".
func (s *DeviceState) DestroyedError(op, what string) error {
	return fmt.Errorf("%s: %s: %s was destroyed: %w", s.Who, op, what, driver.ErrInvalidValue)
}

// NotPinnedError is the error of an asynchronous copy (op) whose host slice
// b does not lie inside one live HostBuffer of the device.
func (s *DeviceState) NotPinnedError(op string, b []byte) error {
	return fmt.Errorf("%s: %s: %d bytes at %p are not inside a live HostBuffer of this device: %w",
		s.Who, op, len(b), unsafe.SliceData(b), driver.ErrNotPinned)
}

// CheckGranularity checks that n, the argument what of VMM call op, is a
// multiple of granularity (> 0): a positive one, or also 0 when zeroOK (an
// offset).
func (s *DeviceState) CheckGranularity(op, what string, n, granularity uint64, zeroOK bool) error {
	if (n == 0 && !zeroOK) || n%granularity != 0 {
		return fmt.Errorf("%s: %s: %s %d is not a positive multiple of the granularity %d: %w",
			s.Who, op, what, n, granularity, driver.ErrInvalidValue)
	}
	return nil
}

// CheckAlignment checks the alignment given to VMM.AddressReserve: 0 (the
// granularity) or a power of two.
func (s *DeviceState) CheckAlignment(op string, alignment uint64) error {
	if alignment != 0 && bits.OnesCount64(alignment) != 1 {
		return fmt.Errorf("%s: %s: alignment %d is not 0 or a power of two: %w", s.Who, op, alignment, driver.ErrInvalidValue)
	}
	return nil
}

// ClosedError is the error of op after the driver closed; who names the
// driver or device, such as "sim" or "sim device 0".
func ClosedError(who, op string) error {
	return fmt.Errorf("%s: %s: %w", who, op, driver.ErrClosed)
}

// CheckOrdinal checks the ordinal given to Driver.Device of a driver with
// count devices; backend is the driver's name, such as "sim".
func CheckOrdinal(backend string, ordinal, count int) error {
	if ordinal < 0 || ordinal >= count {
		return fmt.Errorf("%s: device ordinal %d out of range [0, %d): %w", backend, ordinal, count, driver.ErrNoDevice)
	}
	return nil
}
