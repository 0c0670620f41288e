// Command accelkit_alloc is devalloc as a C shared library that PyTorch and CuPy
// load as their CUDA allocator: build it with
//
//	go build -buildmode=c-shared -o libaccelkit_alloc.so github.com/accelkit/accelkit/devalloc/capi/cmd/accelkit_alloc
//
// (or `go tool task capi`, which also copies accelkit_alloc.h, the C
// header), then hand the library to
// torch.cuda.memory.CUDAPluggableAllocator(path, "accelkit_torch_alloc",
// "accelkit_torch_free") or to cupy.cuda.memory.CFunctionAllocator with
// accelkit_cupy_malloc and accelkit_cupy_free. accelkit_alloc.h declares
// every entry point and says what each does; the README has the recipes.
//
// The library holds one capi.Library for the process: one devalloc
// resource per CUDA device, opened on
// driver/cuda in the process's primary contexts (those the CUDA runtime
// and PyTorch use) with the configuration of ACCELKIT_ALLOC_CONF, read
// once at the first call. A caller's cudaStream_t is a stream accelkit
// does not own (cuda.ForeignStream); a free returns the block to the pool
// of the stream it was allocated on, stream-ordered. Errors never crash
// the caller: each call leaves a thread-local message for
// accelkit_last_error, and a bad call (unknown pointer, wrong size, a
// device that does not exist) changes nothing. Built as an ordinary
// program it does nothing: it is meant as a library.
package main
