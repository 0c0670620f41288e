// Package cuda is the CUDA backend of accelkit's driver layer: a thin cgo
// shim over the CUDA driver API, registered as "cuda".
//
// It dlopens libcuda.so.1 at run time (ACCELKIT_LIBCUDA, or the DSN key
// lib=PATH, names another file) and dlsyms each entry point, versioned names
// such as cuMemAlloc_v2 first, so it builds without a CUDA toolkit and
// loads wherever a driver is installed. A missing library is an error
// wrapping driver.ErrNoDevice, never a crash; a missing optional entry point
// turns its capability off: VMM (which also needs the device's
// CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), Peer, and
// HostRegisterDevice (cuMemHostRegister_v2 and cuMemHostUnregister, and
// CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED). A registration pins the
// caller's Go memory with a runtime.Pinner before the driver keeps its
// address, and HostUnregister waits for the context's queued work before
// the driver lets go of it.
//
// Every driver operation is one cgo call into a C shim that first makes the
// device's primary context current on the calling thread (cuCtxGetCurrent,
// and cuCtxSetCurrent only when it differs), because a goroutine may run on
// another thread at its next call. Streams are created
// CU_STREAM_NON_BLOCKING, events CU_EVENT_DISABLE_TIMING.
//
// Errors are *driver.Error values carrying the CUresult and its name; they
// unwrap to the driver sentinels. Context-poisoning results
// (CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED, ECC and hardware
// faults) map to driver.ErrDeviceLost, which stays on the device: every
// later call fails with it. Free of an unknown pointer or a double free is
// driver.ErrInvalidPointer, caught from the backend's own set of live
// allocations without a driver call.
//
// The backend needs cgo on Linux. Elsewhere, or with CGO_ENABLED=0, the
// package still registers "cuda", and Open returns an error wrapping
// driver.ErrNotSupported, so programs that import it build everywhere.
//
// Its tests run on any Linux machine with a C compiler against a fake
// libcuda built during the test (package cudatest, which other modules'
// tests use too). On a GPU machine the same test
// binary also runs the conformance suite and benchmarks on the real driver.
package cuda
