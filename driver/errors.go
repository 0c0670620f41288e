package driver

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every backend's failures unwrap to one of these, so
// errors.Is(err, driver.ErrOutOfMemory) works whatever the backend.
var (
	ErrOutOfMemory    = errors.New("driver: out of memory")
	ErrInvalidValue   = errors.New("driver: invalid value")
	ErrInvalidPointer = errors.New("driver: invalid pointer") // unknown pointer, double free
	ErrNotPinned      = errors.New("driver: host memory not pinned: async copies need a slice inside a live HostBuffer")
	ErrNotSupported   = errors.New("driver: not supported")
	ErrNoDevice       = errors.New("driver: no device")
	// ErrClosed is use of a closed driver, device, stream or event. Every
	// accelkit module's ErrClosed matches it with errors.Is: modules that
	// import driver wrap it with %w; a module that stands without driver
	// (progcache) declares a closed error whose Is method accepts any target
	// with an AccelkitClosed method, which ErrClosed has.
	ErrClosed error = closedError{}
	// ErrAlreadyRegistered is HostRegister of a range that overlaps host
	// memory already page-locked through the driver: a live registration
	// (of any of its devices) or a HostAlloc buffer. CUDA's
	// CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED maps to it.
	ErrAlreadyRegistered = errors.New("driver: host memory already registered")
	// ErrNotRegistered is HostUnregister of a buffer that is not a live
	// registration of the device: a HostAlloc buffer, one unregistered
	// already, one of another device. CUDA's
	// CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED maps to it.
	ErrNotRegistered = errors.New("driver: host memory not registered")
	// ErrDeviceLost is sticky on the device: once seen, every later call on
	// the device and its streams and events fails with it.
	ErrDeviceLost = errors.New("driver: device lost")
	// ErrInvalidImage is Launcher.LoadModule of an image the backend cannot
	// load: not a PTX, cubin or fatbin image, PTX of a newer ISA than the
	// driver's JIT, or no code for the device's architecture. CUDA's
	// CUDA_ERROR_INVALID_IMAGE, _INVALID_PTX, _NO_BINARY_FOR_GPU and
	// _UNSUPPORTED_PTX_VERSION map to it.
	ErrInvalidImage = errors.New("driver: invalid program image")
	// ErrNotFound is Module.Kernel of a name the module does not have
	// (CUDA_ERROR_NOT_FOUND).
	ErrNotFound = errors.New("driver: not found")
)

// closedError is ErrClosed's type. Its AccelkitClosed method is the mark a
// module without the driver import recognises (see ErrClosed); the type is
// comparable, so errors.Is(err, ErrClosed) keeps matching by ==.
type closedError struct{}

func (closedError) Error() string { return "driver: closed" }

// AccelkitClosed marks the error as accelkit's closed sentinel.
func (closedError) AccelkitClosed() {}

// Error is a backend failure: the operation, the backend's own code and
// name for it, and the sentinel it maps to.
type Error struct {
	Op     string // backend call, such as "cuMemAlloc_v2"
	Code   int    // backend error code, such as 2
	Name   string // backend error name, such as "CUDA_ERROR_OUT_OF_MEMORY"
	Err    error  // the sentinel this failure maps to (may be nil)
	Detail string // optional: what to check or do
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s (%d)", e.Op, e.Name, e.Code)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns the sentinel, so errors.Is matches across backends.
func (e *Error) Unwrap() error { return e.Err }
