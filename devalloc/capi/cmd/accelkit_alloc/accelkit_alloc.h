/*
 * accelkit_alloc.h: devalloc, accelkit's caching device allocator, as a C
 * library (libaccelkit_alloc.so, built from github.com/accelkit/accelkit/
 * devalloc/capi/cmd/accelkit_alloc with go build -buildmode=c-shared) that PyTorch and CuPy
 * load as their CUDA allocator.
 *
 * Every function may be called from any thread, at any time, concurrently.
 * The first call opens the CUDA driver (libcuda.so.1, or the file
 * ACCELKIT_LIBCUDA names) and reads the configuration, once, from
 * ACCELKIT_ALLOC_CONF in PYTORCH_CUDA_ALLOC_CONF syntax
 * ("expandable_segments:true,max_split_size_mb:128"); when either fails,
 * every call fails with that error.
 *
 * Errors: a call that fails returns NULL or -1 (or, for the frees, returns
 * nothing) and leaves a message for accelkit_last_error. A bad call (an
 * unknown pointer, a wrong size, a device that does not exist) changes
 * nothing. Nothing crashes the process: an internal error is reported the
 * same way.
 */
#ifndef ACCELKIT_ALLOC_H
#define ACCELKIT_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's torch.cuda.memory.CUDAPluggableAllocator(path,
 * "accelkit_torch_alloc", "accelkit_torch_free"). stream is the
 * cudaStream_t the memory is for (0, cudaStreamLegacy and
 * cudaStreamPerThread included); the block goes back to that stream's pool
 * at free, reusable by later work on that stream at once (stream-ordered).
 * alloc of 0 bytes returns NULL with no error. On out of memory, after
 * releasing the cache and retrying, alloc returns NULL with the error set.
 * free must get the size alloc got. */
void *accelkit_torch_alloc(size_t size, int device, void *stream);
void accelkit_torch_free(void *ptr, size_t size, int device, void *stream);

/* CuPy's cupy.cuda.memory.CFunctionAllocator(param, malloc, free, owner):
 * malloc is void *(void *param, size_t size, int device), free is
 * void (void *param, void *ptr, int device). param is the cudaStream_t the
 * memory is for, as stream above (0: the legacy default stream). */
void *accelkit_cupy_malloc(void *param, size_t size, int device);
void accelkit_cupy_free(void *param, void *ptr, int device);

/* The message of the calling thread's last accelkit call if that call
 * failed, else NULL. Thread-local and per call: every call (this one
 * aside) clears it first, so read it right after the call that failed, on
 * the same thread. The string stays valid until the thread's next call. */
const char *accelkit_last_error(void);

/* The number of CUDA devices, or -1. */
int accelkit_device_count(void);

/* Writes device's statistics as one JSON object with the names of
 * torch.cuda.memory_stats ("allocated_bytes.all.current", ...) into buf,
 * at most len bytes with the terminating NUL, as snprintf does, and
 * returns the JSON's full length (a larger buf is needed when it is >=
 * len), or -1. */
long accelkit_stats_json(int device, char *buf, size_t len);

/* Releases the cached memory no allocation uses (device -1: every device),
 * as torch.cuda.empty_cache. 0, or -1. */
int accelkit_empty_cache(int device);

/* Caps the memory device reserves at fraction (0, 1] of its total, as
 * torch.cuda.set_per_process_memory_fraction(fraction, device). 0, or -1. */
int accelkit_set_memory_fraction(double fraction, int device);

/* Sets device's peak statistics to their current values. 0, or -1. */
int accelkit_reset_peak_stats(int device);

/* Writes device's memory snapshot to path as the pickle that
 * torch.cuda.memory._dump_snapshot writes and PyTorch's memory_viz opens
 * (through a temporary file renamed into place; a symbolic link at path is
 * refused). 0, or -1. */
int accelkit_snapshot(int device, const char *path);

#ifdef __cplusplus
}
#endif

#endif
