// Package capi is the Go side of devalloc's C library for PyTorch and
// CuPy (cmd/accelkit_alloc, built with -buildmode=c-shared): a Library
// holds one devalloc resource per device of driver/cuda and makes the
// frameworks' calls of it. Alloc takes the caller's cudaStream_t as a
// handle (cuda.ForeignStream); Free checks the pointer, device and size
// against its table of live allocations first, so a bad call is an error
// that changes nothing; statistics come as JSON with PyTorch's names and
// snapshots as the pickle PyTorch's memory_viz opens.
//
//	lib, err := capi.Open("", devalloc.Config{}) // libcuda.so.1, or $ACCELKIT_LIBCUDA
//	p, err := lib.Alloc(1<<20, 0, stream)         // device 0, a cudaStream_t
//	err = lib.Free(p, 1<<20, 0, stream)
//
// A Library is safe for concurrent use. Calls that name
// cuda.StreamPerThread must come from a locked OS thread, as a cgo
// callback's does.
package capi
