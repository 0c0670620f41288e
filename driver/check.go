package driver

import (
	"fmt"
	"math/bits"
	"unsafe"
)

// The checks and errors every backend makes alike, for backend authors, so
// that the same misuse is refused the same way, with the same message, on
// every backend. who names the device the way the backend's messages start,
// such as "sim device 0"; op is the Device method, such as "HostAlloc".
// Each message says what was wrong and what is valid, and wraps the
// sentinel the conformance suite (drivertest) expects.

// ClosedError is the error of op on a device whose driver was closed.
func ClosedError(who, op string) error {
	return fmt.Errorf("%s: %s: driver %w", who, op, ErrClosed)
}

// CheckOrdinal checks the ordinal given to Driver.Device of a driver with
// count devices; backend is the driver's name, such as "sim".
func CheckOrdinal(backend string, ordinal, count int) error {
	if ordinal < 0 || ordinal >= count {
		return fmt.Errorf("%s: device ordinal %d out of range [0, %d): %w", backend, ordinal, count, ErrNoDevice)
	}
	return nil
}

// CheckHostAlloc checks the size given to HostAlloc. Size 0 is valid: the
// backend then returns an empty buffer without a driver call.
func CheckHostAlloc(who string, size int) error {
	if size < 0 {
		return fmt.Errorf("%s: HostAlloc(%d): size must be >= 0: %w", who, size, ErrInvalidValue)
	}
	return nil
}

// HostBufferState checks the buffer given to HostFree on dev (the value the
// backend hands out) and returns the bookkeeping the backend gave
// NewHostBuffer: nil is ErrInvalidValue; a buffer of another device or
// backend, whose state is not a T, is ErrInvalidPointer. Whether the
// buffer was already freed is the backend's to check (HostFreedError).
func HostBufferState[T any](who string, dev Device, b *HostBuffer) (T, error) {
	var zero T
	if b == nil {
		return zero, fmt.Errorf("%s: HostFree(nil): %w", who, ErrInvalidValue)
	}
	st, ok := b.State().(T)
	if !ok || b.Device() != dev {
		return zero, fmt.Errorf("%s: HostFree: buffer was not allocated by this device's HostAlloc: %w", who, ErrInvalidPointer)
	}
	return st, nil
}

// HostFreedError is the error of HostFree on a buffer of size bytes that
// was already freed.
func HostFreedError(who string, size int) error {
	return fmt.Errorf("%s: HostFree: buffer of %d bytes already freed: %w", who, size, ErrInvalidPointer)
}

// UnknownPointerError is the error of Free(p) when p is not a live Malloc
// allocation of the device.
func UnknownPointerError(who string, p Ptr) error {
	return fmt.Errorf("%s: Free(%v): not a live allocation of this device (never allocated here, or already freed): %w", who, p, ErrInvalidPointer)
}

// ForeignStreamError is the error of op given a stream that is not one of
// the device's own (another device's, another backend's, or a nil pointer
// of the backend's stream type). A nil Stream is never foreign: it means
// the default stream (StreamOr).
func ForeignStreamError(who, op string, s Stream) error {
	return fmt.Errorf("%s: %s: stream %T is not a stream of this device: %w", who, op, s, ErrInvalidValue)
}

// DestroyedError is the error of op on an object after its Destroy; what
// names it, such as "stream 3" or "event".
func DestroyedError(who, op, what string) error {
	return fmt.Errorf("%s: %s: %s was destroyed: %w", who, op, what, ErrInvalidValue)
}

// NotPinnedError is the error of an asynchronous copy (op) whose host slice
// b does not lie inside one live HostBuffer of the device.
func NotPinnedError(who, op string, b []byte) error {
	return fmt.Errorf("%s: %s: %d bytes at %p are not inside a live HostBuffer of this device: %w",
		who, op, len(b), unsafe.SliceData(b), ErrNotPinned)
}

// CheckGranularity checks that n, the argument what of VMM call op, is a
// multiple of the device's granularity: a positive one, or also 0 when
// zeroOK (an offset).
func CheckGranularity(who, op, what string, n, granularity uint64, zeroOK bool) error {
	if (n == 0 && !zeroOK) || n%granularity != 0 {
		return fmt.Errorf("%s: %s: %s %d is not a positive multiple of the granularity %d: %w",
			who, op, what, n, granularity, ErrInvalidValue)
	}
	return nil
}

// CheckAlignment checks the alignment given to VMM.AddressReserve: 0 (the
// granularity) or a power of two.
func CheckAlignment(who, op string, alignment uint64) error {
	if alignment != 0 && bits.OnesCount64(alignment) != 1 {
		return fmt.Errorf("%s: %s: alignment %d is not 0 or a power of two: %w", who, op, alignment, ErrInvalidValue)
	}
	return nil
}
