/*
 * The C half of the cuda backend: the few CUDA driver API types it needs
 * (declared here, so no CUDA toolkit is needed to build), a table of entry
 * points filled by dlsym, and one shim function per driver operation.
 *
 * Every shim function first makes the device's primary context current on
 * the calling thread (ak_use: cuCtxGetCurrent, and cuCtxSetCurrent only when
 * it differs), then makes its call, all inside one cgo call: a goroutine can
 * move to another thread between two cgo calls, so a context made current in
 * an earlier call proves nothing, and a Go-side per-thread cache could go
 * stale. When the context step fails, the CUresult comes back with
 * AK_IN_GET or AK_IN_SET or'ed in, so the Go side names the failing call.
 *
 * Each cgo file of the package includes it; everything is static inline.
 */
#ifndef ACCELKIT_CUDA_SHIM_H
#define ACCELKIT_CUDA_SHIM_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Each cgo file compiles this header on its own; not every file uses everything. */
#define AK_UNUSED __attribute__((unused))
#define AK_FUNC static inline AK_UNUSED

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;

/* CUmemLocation, CUmemAllocationProp, CUmemAccessDesc as in cuda.h (the
 * enums are int-sized). */
typedef struct { int type; int id; } ak_CUmemLocation;
typedef struct {
	int type;                 /* CUmemAllocationType: CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
	int requestedHandleTypes; /* CUmemAllocationHandleType: none = 0 */
	ak_CUmemLocation location;/* CU_MEM_LOCATION_TYPE_DEVICE = 1, ordinal */
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} ak_CUmemAllocationProp;
typedef struct { ak_CUmemLocation location; int flags; } ak_CUmemAccessDesc;

_Static_assert(sizeof(ak_CUmemAllocationProp) == 32, "CUmemAllocationProp layout");
_Static_assert(sizeof(ak_CUmemAccessDesc) == 12, "CUmemAccessDesc layout");

#define AK_CU_STREAM_NON_BLOCKING 0x1u
#define AK_CU_EVENT_DISABLE_TIMING 0x2u
#define AK_CU_MEM_ALLOCATION_TYPE_PINNED 1
#define AK_CU_MEM_LOCATION_TYPE_DEVICE 1
#define AK_CU_MEM_ACCESS_FLAGS_PROT_READWRITE 3
#define AK_CU_MEM_ALLOC_GRANULARITY_MINIMUM 0

/* Which call of a shim failed, or'ed into the CUresult it returns. */
#define AK_IN_GET  (1 << 20) /* cuCtxGetCurrent */
#define AK_IN_SET  (1 << 21) /* cuCtxSetCurrent */
#define AK_IN_SYNC (1 << 22) /* the cuStreamSynchronize after a sync copy */
#define AK_IN_CTXSYNC (1 << 23) /* the cuCtxSynchronize before cuMemHostUnregister or an unload */
#define AK_CODE_MASK ((1 << 20) - 1)

/* Symbol groups: a missing REQ symbol fails the load; a missing VMM, PEER
 * or HOSTREG symbol turns that capability off; NAMES is optional (own
 * table). The launch capability needs LAUNCH and one whole loader: LIBRARY
 * (CUDA 12.0's context-independent cuLibrary*), else MODULE (cuModule*);
 * KPARAM and FPARAM (CUDA 12.4's parameter info for each) are optional on
 * their own. */
enum {
	AK_REQ = 0, AK_VMM = 1, AK_PEER = 2, AK_NAMES = 3, AK_HOSTREG = 4,
	AK_LIBRARY = 5, AK_KPARAM = 6, AK_MODULE = 7, AK_FPARAM = 8, AK_LAUNCH = 9,
};

/*
 * X(name, group, fallback, params). name is the symbol looked up first: the
 * versioned one where CUDA has it. fallback is a plain name tried when name
 * is missing, given only where the plain symbol has the same ABI: the plain
 * cuMemAlloc, cuMemFree, cuMemGetInfo, cuDeviceTotalMem and cuMemcpy* are
 * the pre-3.2 entry points with 32-bit device pointers and sizes, so they
 * have no fallback. Nor has cuMemHostRegister_v2 (CUDA 6.5): the plain
 * cuMemHostRegister before it took only page-aligned ranges.
 */
#define AK_SYMBOLS(X) \
	X(cuInit, AK_REQ, NULL, (unsigned int)) \
	X(cuDriverGetVersion, AK_REQ, NULL, (int *)) \
	X(cuDeviceGetCount, AK_REQ, NULL, (int *)) \
	X(cuDeviceGet, AK_REQ, NULL, (CUdevice *, int)) \
	X(cuDeviceGetName, AK_REQ, NULL, (char *, int, CUdevice)) \
	X(cuDeviceGetAttribute, AK_REQ, NULL, (int *, int, CUdevice)) \
	X(cuDeviceTotalMem_v2, AK_REQ, NULL, (size_t *, CUdevice)) \
	X(cuDevicePrimaryCtxRetain, AK_REQ, NULL, (CUcontext *, CUdevice)) \
	X(cuDevicePrimaryCtxRelease_v2, AK_REQ, "cuDevicePrimaryCtxRelease", (CUdevice)) \
	X(cuCtxGetCurrent, AK_REQ, NULL, (CUcontext *)) \
	X(cuCtxSetCurrent, AK_REQ, NULL, (CUcontext)) \
	X(cuCtxSynchronize, AK_REQ, NULL, (void)) \
	X(cuMemGetInfo_v2, AK_REQ, NULL, (size_t *, size_t *)) \
	X(cuMemAlloc_v2, AK_REQ, NULL, (CUdeviceptr *, size_t)) \
	X(cuMemFree_v2, AK_REQ, NULL, (CUdeviceptr)) \
	X(cuMemHostAlloc, AK_REQ, NULL, (void **, size_t, unsigned int)) \
	X(cuMemFreeHost, AK_REQ, NULL, (void *)) \
	X(cuMemcpyHtoD_v2, AK_REQ, NULL, (CUdeviceptr, const void *, size_t)) \
	X(cuMemcpyDtoH_v2, AK_REQ, NULL, (void *, CUdeviceptr, size_t)) \
	X(cuMemcpyHtoDAsync_v2, AK_REQ, NULL, (CUdeviceptr, const void *, size_t, CUstream)) \
	X(cuMemcpyDtoHAsync_v2, AK_REQ, NULL, (void *, CUdeviceptr, size_t, CUstream)) \
	X(cuMemcpyDtoDAsync_v2, AK_REQ, NULL, (CUdeviceptr, CUdeviceptr, size_t, CUstream)) \
	X(cuMemsetD8Async, AK_REQ, NULL, (CUdeviceptr, unsigned char, size_t, CUstream)) \
	X(cuStreamCreate, AK_REQ, NULL, (CUstream *, unsigned int)) \
	X(cuStreamDestroy_v2, AK_REQ, "cuStreamDestroy", (CUstream)) \
	X(cuStreamQuery, AK_REQ, NULL, (CUstream)) \
	X(cuStreamSynchronize, AK_REQ, NULL, (CUstream)) \
	X(cuStreamWaitEvent, AK_REQ, NULL, (CUstream, CUevent, unsigned int)) \
	X(cuEventCreate, AK_REQ, NULL, (CUevent *, unsigned int)) \
	X(cuEventDestroy_v2, AK_REQ, "cuEventDestroy", (CUevent)) \
	X(cuEventRecord, AK_REQ, NULL, (CUevent, CUstream)) \
	X(cuEventQuery, AK_REQ, NULL, (CUevent)) \
	X(cuEventSynchronize, AK_REQ, NULL, (CUevent)) \
	X(cuGetErrorName, AK_NAMES, NULL, (CUresult, const char **)) \
	X(cuMemGetAllocationGranularity, AK_VMM, NULL, (size_t *, const ak_CUmemAllocationProp *, int)) \
	X(cuMemAddressReserve, AK_VMM, NULL, (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)) \
	X(cuMemAddressFree, AK_VMM, NULL, (CUdeviceptr, size_t)) \
	X(cuMemCreate, AK_VMM, NULL, (CUmemGenericAllocationHandle *, size_t, const ak_CUmemAllocationProp *, unsigned long long)) \
	X(cuMemRelease, AK_VMM, NULL, (CUmemGenericAllocationHandle)) \
	X(cuMemMap, AK_VMM, NULL, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)) \
	X(cuMemUnmap, AK_VMM, NULL, (CUdeviceptr, size_t)) \
	X(cuMemSetAccess, AK_VMM, NULL, (CUdeviceptr, size_t, const ak_CUmemAccessDesc *, size_t)) \
	X(cuDeviceCanAccessPeer, AK_PEER, NULL, (int *, CUdevice, CUdevice)) \
	X(cuCtxEnablePeerAccess, AK_PEER, NULL, (CUcontext, unsigned int)) \
	X(cuMemcpyPeerAsync, AK_PEER, NULL, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream)) \
	X(cuMemHostRegister_v2, AK_HOSTREG, NULL, (void *, size_t, unsigned int)) \
	X(cuMemHostUnregister, AK_HOSTREG, NULL, (void *)) \
	X(cuLibraryLoadData, AK_LIBRARY, NULL, (CUlibrary *, const void *, int *, void **, unsigned int, int *, void **, unsigned int)) \
	X(cuLibraryGetKernel, AK_LIBRARY, NULL, (CUkernel *, CUlibrary, const char *)) \
	X(cuLibraryUnload, AK_LIBRARY, NULL, (CUlibrary)) \
	X(cuKernelGetParamInfo, AK_KPARAM, NULL, (CUkernel, size_t, size_t *, size_t *)) \
	X(cuModuleLoadDataEx, AK_MODULE, NULL, (CUmodule *, const void *, unsigned int, int *, void **)) \
	X(cuModuleGetFunction, AK_MODULE, NULL, (CUfunction *, CUmodule, const char *)) \
	X(cuModuleUnload, AK_MODULE, NULL, (CUmodule)) \
	X(cuFuncGetParamInfo, AK_FPARAM, NULL, (CUfunction, size_t, size_t *, size_t *)) \
	X(cuLaunchKernel, AK_LAUNCH, NULL, (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void **, void **))

enum {
#define AK_X(n, g, alt, args) AKI_##n,
	AK_SYMBOLS(AK_X)
#undef AK_X
	AK_NSYMS
};

#define AK_X(n, g, alt, args) typedef CUresult (*ak_fn_##n) args;
AK_SYMBOLS(AK_X)
#undef AK_X

AK_UNUSED static const char *const ak_sym_names[AK_NSYMS] = {
#define AK_X(n, g, alt, args) #n,
	AK_SYMBOLS(AK_X)
#undef AK_X
};
AK_UNUSED static const char *const ak_sym_alts[AK_NSYMS] = {
#define AK_X(n, g, alt, args) alt,
	AK_SYMBOLS(AK_X)
#undef AK_X
};
AK_UNUSED static const int ak_sym_groups[AK_NSYMS] = {
#define AK_X(n, g, alt, args) g,
	AK_SYMBOLS(AK_X)
#undef AK_X
};

typedef struct {
	void *handle;
	void *fn[AK_NSYMS];
} ak_lib;

#define AK_FN(l, n) ((ak_fn_##n)(l)->fn[AKI_##n])

AK_FUNC const char *ak_sym_name(int i) { return ak_sym_names[i]; }
AK_FUNC int ak_sym_group(int i) { return ak_sym_groups[i]; }
AK_FUNC int ak_sym_present(const ak_lib *l, int i) { return l->fn[i] != NULL; }

/* ak_open dlopens path and resolves every symbol. On failure it returns NULL
 * with the reason in err: the dlerror text, or the name of a missing
 * required symbol (then *missing is 1). */
AK_FUNC ak_lib *ak_open(const char *path, char *err, size_t errlen, int *missing) {
	*missing = 0;
	dlerror();
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
		return NULL;
	}
	ak_lib *l = calloc(1, sizeof *l);
	if (l == NULL) {
		strncpy(err, "out of memory", errlen - 1);
		dlclose(h);
		return NULL;
	}
	l->handle = h;
	for (int i = 0; i < AK_NSYMS; i++) {
		void *f = dlsym(h, ak_sym_names[i]);
		if (f == NULL && ak_sym_alts[i] != NULL) f = dlsym(h, ak_sym_alts[i]);
		if (f == NULL && ak_sym_groups[i] == AK_REQ) {
			*missing = 1;
			strncpy(err, ak_sym_names[i], errlen - 1);
			err[errlen - 1] = 0;
			free(l);
			dlclose(h);
			return NULL;
		}
		l->fn[i] = f;
	}
	return l;
}

/* ---- context ---------------------------------------------------------------- */

AK_FUNC CUresult ak_use(const ak_lib *l, CUcontext ctx) {
	CUcontext cur = NULL;
	CUresult r = AK_FN(l, cuCtxGetCurrent)(&cur);
	if (r != 0) return r | AK_IN_GET;
	if (cur != ctx) {
		r = AK_FN(l, cuCtxSetCurrent)(ctx);
		if (r != 0) return r | AK_IN_SET;
	}
	return 0;
}

#define AK_USE(l, ctx) do { CUresult r_ = ak_use((l), (ctx)); if (r_ != 0) return r_; } while (0)

/* ---- set-up (no context needed) ------------------------------------------- */

AK_FUNC CUresult ak_init(const ak_lib *l) { return AK_FN(l, cuInit)(0); }
AK_FUNC CUresult ak_driver_version(const ak_lib *l, int *v) { return AK_FN(l, cuDriverGetVersion)(v); }
AK_FUNC CUresult ak_device_count(const ak_lib *l, int *n) { return AK_FN(l, cuDeviceGetCount)(n); }
AK_FUNC CUresult ak_device_get(const ak_lib *l, int ordinal, CUdevice *d) { return AK_FN(l, cuDeviceGet)(d, ordinal); }
AK_FUNC CUresult ak_device_name(const ak_lib *l, CUdevice d, char *buf, int len) { return AK_FN(l, cuDeviceGetName)(buf, len, d); }
AK_FUNC CUresult ak_device_attr(const ak_lib *l, CUdevice d, int attr, int *v) { return AK_FN(l, cuDeviceGetAttribute)(v, attr, d); }
AK_FUNC CUresult ak_device_total(const ak_lib *l, CUdevice d, size_t *n) { return AK_FN(l, cuDeviceTotalMem_v2)(n, d); }
AK_FUNC CUresult ak_retain(const ak_lib *l, CUdevice d, CUcontext *c) { return AK_FN(l, cuDevicePrimaryCtxRetain)(c, d); }
AK_FUNC CUresult ak_release(const ak_lib *l, CUdevice d) { return AK_FN(l, cuDevicePrimaryCtxRelease_v2)(d); }

/* ak_error_name returns the driver's name for code, or NULL. */
AK_FUNC const char *ak_error_name(const ak_lib *l, CUresult code) {
	const char *s = NULL;
	if (l->fn[AKI_cuGetErrorName] == NULL) return NULL;
	if (AK_FN(l, cuGetErrorName)(code, &s) != 0) return NULL;
	return s;
}

AK_FUNC void ak_prop(ak_CUmemAllocationProp *p, CUdevice d) {
	memset(p, 0, sizeof *p);
	p->type = AK_CU_MEM_ALLOCATION_TYPE_PINNED;
	p->location.type = AK_CU_MEM_LOCATION_TYPE_DEVICE;
	p->location.id = d;
}

AK_FUNC CUresult ak_granularity(const ak_lib *l, CUdevice d, size_t *g) {
	ak_CUmemAllocationProp p;
	ak_prop(&p, d);
	return AK_FN(l, cuMemGetAllocationGranularity)(g, &p, AK_CU_MEM_ALLOC_GRANULARITY_MINIMUM);
}

AK_FUNC CUresult ak_can_access_peer(const ak_lib *l, CUdevice d, CUdevice peer, int *can) {
	return AK_FN(l, cuDeviceCanAccessPeer)(can, d, peer);
}

/* ---- operations (each makes ctx current first) ---------------------------- */

AK_FUNC CUresult ak_ctx_check(const ak_lib *l, CUcontext c) { return ak_use(l, c); }

AK_FUNC CUresult ak_mem_info(const ak_lib *l, CUcontext c, size_t *free_, size_t *total) {
	AK_USE(l, c);
	return AK_FN(l, cuMemGetInfo_v2)(free_, total);
}

/* ak_malloc returns the pointer in its result rather than through an out
 * parameter: a Go variable whose address goes to C escapes to the heap,
 * one allocation per Malloc. */
typedef struct { CUresult r; CUdeviceptr p; } ak_ptr_result;

AK_FUNC ak_ptr_result ak_malloc(const ak_lib *l, CUcontext c, size_t n) {
	ak_ptr_result res = {0, 0};
	res.r = ak_use(l, c);
	if (res.r == 0) res.r = AK_FN(l, cuMemAlloc_v2)(&res.p, n);
	return res;
}

AK_FUNC CUresult ak_free(const ak_lib *l, CUcontext c, CUdeviceptr p) {
	AK_USE(l, c);
	return AK_FN(l, cuMemFree_v2)(p);
}

AK_FUNC CUresult ak_host_alloc(const ak_lib *l, CUcontext c, size_t n, void **p) {
	AK_USE(l, c);
	return AK_FN(l, cuMemHostAlloc)(p, n, 0);
}

AK_FUNC CUresult ak_host_free(const ak_lib *l, CUcontext c, void *p) {
	AK_USE(l, c);
	return AK_FN(l, cuMemFreeHost)(p);
}

AK_FUNC CUresult ak_htod_async(const ak_lib *l, CUcontext c, CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	AK_USE(l, c);
	return AK_FN(l, cuMemcpyHtoDAsync_v2)(dst, src, n, s);
}

AK_FUNC CUresult ak_dtoh_async(const ak_lib *l, CUcontext c, void *dst, CUdeviceptr src, size_t n, CUstream s) {
	AK_USE(l, c);
	return AK_FN(l, cuMemcpyDtoHAsync_v2)(dst, src, n, s);
}

AK_FUNC CUresult ak_dtod_async(const ak_lib *l, CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
	AK_USE(l, c);
	return AK_FN(l, cuMemcpyDtoDAsync_v2)(dst, src, n, s);
}

AK_FUNC CUresult ak_memset_async(const ak_lib *l, CUcontext c, CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
	AK_USE(l, c);
	return AK_FN(l, cuMemsetD8Async)(dst, v, n, s);
}

/* ak_htod_sync copies from pageable memory, which cuMemcpyHtoD may return
 * from once the data is staged; the legacy-default-stream synchronize after
 * it makes the copy complete, so work on any stream sees it. */
AK_FUNC CUresult ak_htod_sync(const ak_lib *l, CUcontext c, CUdeviceptr dst, const void *src, size_t n) {
	AK_USE(l, c);
	CUresult r = AK_FN(l, cuMemcpyHtoD_v2)(dst, src, n);
	if (r != 0) return r;
	r = AK_FN(l, cuStreamSynchronize)(NULL);
	return r != 0 ? (r | AK_IN_SYNC) : 0;
}

AK_FUNC CUresult ak_dtoh_sync(const ak_lib *l, CUcontext c, void *dst, CUdeviceptr src, size_t n) {
	AK_USE(l, c);
	return AK_FN(l, cuMemcpyDtoH_v2)(dst, src, n);
}

AK_FUNC CUresult ak_ctx_sync(const ak_lib *l, CUcontext c) {
	AK_USE(l, c);
	return AK_FN(l, cuCtxSynchronize)();
}

AK_FUNC CUresult ak_stream_create(const ak_lib *l, CUcontext c, CUstream *s) {
	AK_USE(l, c);
	return AK_FN(l, cuStreamCreate)(s, AK_CU_STREAM_NON_BLOCKING);
}

AK_FUNC CUresult ak_stream_destroy(const ak_lib *l, CUcontext c, CUstream s) {
	AK_USE(l, c);
	return AK_FN(l, cuStreamDestroy_v2)(s);
}

AK_FUNC CUresult ak_stream_query(const ak_lib *l, CUcontext c, CUstream s) {
	AK_USE(l, c);
	return AK_FN(l, cuStreamQuery)(s);
}

AK_FUNC CUresult ak_stream_sync(const ak_lib *l, CUcontext c, CUstream s) {
	AK_USE(l, c);
	return AK_FN(l, cuStreamSynchronize)(s);
}

AK_FUNC CUresult ak_stream_wait(const ak_lib *l, CUcontext c, CUstream s, CUevent e) {
	AK_USE(l, c);
	return AK_FN(l, cuStreamWaitEvent)(s, e, 0);
}

AK_FUNC CUresult ak_event_create(const ak_lib *l, CUcontext c, CUevent *e) {
	AK_USE(l, c);
	return AK_FN(l, cuEventCreate)(e, AK_CU_EVENT_DISABLE_TIMING);
}

AK_FUNC CUresult ak_event_destroy(const ak_lib *l, CUcontext c, CUevent e) {
	AK_USE(l, c);
	return AK_FN(l, cuEventDestroy_v2)(e);
}

AK_FUNC CUresult ak_event_record(const ak_lib *l, CUcontext c, CUevent e, CUstream s) {
	AK_USE(l, c);
	return AK_FN(l, cuEventRecord)(e, s);
}

AK_FUNC CUresult ak_event_query(const ak_lib *l, CUcontext c, CUevent e) {
	AK_USE(l, c);
	return AK_FN(l, cuEventQuery)(e);
}

AK_FUNC CUresult ak_event_sync(const ak_lib *l, CUcontext c, CUevent e) {
	AK_USE(l, c);
	return AK_FN(l, cuEventSynchronize)(e);
}

/* ---- VMM ------------------------------------------------------------------ */

AK_FUNC CUresult ak_addr_reserve(const ak_lib *l, CUcontext c, size_t size, size_t align, CUdeviceptr *p) {
	AK_USE(l, c);
	return AK_FN(l, cuMemAddressReserve)(p, size, align, 0, 0);
}

AK_FUNC CUresult ak_addr_free(const ak_lib *l, CUcontext c, CUdeviceptr p, size_t size) {
	AK_USE(l, c);
	return AK_FN(l, cuMemAddressFree)(p, size);
}

AK_FUNC CUresult ak_mem_create(const ak_lib *l, CUcontext c, CUdevice d, size_t size, CUmemGenericAllocationHandle *h) {
	ak_CUmemAllocationProp p;
	AK_USE(l, c);
	ak_prop(&p, d);
	return AK_FN(l, cuMemCreate)(h, size, &p, 0);
}

AK_FUNC CUresult ak_mem_release(const ak_lib *l, CUcontext c, CUmemGenericAllocationHandle h) {
	AK_USE(l, c);
	return AK_FN(l, cuMemRelease)(h);
}

AK_FUNC CUresult ak_mem_map(const ak_lib *l, CUcontext c, CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h) {
	AK_USE(l, c);
	return AK_FN(l, cuMemMap)(p, size, off, h, 0);
}

AK_FUNC CUresult ak_mem_unmap(const ak_lib *l, CUcontext c, CUdeviceptr p, size_t size) {
	AK_USE(l, c);
	return AK_FN(l, cuMemUnmap)(p, size);
}

AK_FUNC CUresult ak_set_access(const ak_lib *l, CUcontext c, CUdevice d, CUdeviceptr p, size_t size) {
	ak_CUmemAccessDesc a;
	AK_USE(l, c);
	memset(&a, 0, sizeof a);
	a.location.type = AK_CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = d;
	a.flags = AK_CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	return AK_FN(l, cuMemSetAccess)(p, size, &a, 1);
}

/* ---- peer ----------------------------------------------------------------- */

AK_FUNC CUresult ak_enable_peer(const ak_lib *l, CUcontext c, CUcontext peer) {
	AK_USE(l, c);
	return AK_FN(l, cuCtxEnablePeerAccess)(peer, 0);
}

AK_FUNC CUresult ak_copy_peer(const ak_lib *l, CUcontext c, CUdeviceptr dst, CUdeviceptr src, CUcontext srcctx, size_t n, CUstream s) {
	AK_USE(l, c);
	return AK_FN(l, cuMemcpyPeerAsync)(dst, c, src, srcctx, n, s);
}

/* ---- host registration ------------------------------------------------------ */

/* ak_host_register page-locks [p, p+n) for the context; flags 0: pinned
 * for this context only (not PORTABLE), as cuMemHostAlloc's buffers are,
 * and no device mapping is asked for. */
AK_FUNC CUresult ak_host_register(const ak_lib *l, CUcontext c, void *p, size_t n) {
	AK_USE(l, c);
	return AK_FN(l, cuMemHostRegister_v2)(p, n, 0);
}

/* ak_host_unregister waits for all work of the context before it
 * unregisters p: a transfer still queued on the range must not run after
 * the Go side unpins the memory, which the garbage collector may then
 * reuse. CUDA does not document that cuMemHostUnregister waits itself. */
AK_FUNC CUresult ak_host_unregister(const ak_lib *l, CUcontext c, void *p) {
	AK_USE(l, c);
	CUresult r = AK_FN(l, cuCtxSynchronize)();
	if (r != 0) return r | AK_IN_CTXSYNC;
	return AK_FN(l, cuMemHostUnregister)(p);
}

/* ---- modules and launches --------------------------------------------------- */

/* CUjit_option values (cuda.h): the error log buffer and its size in bytes
 * (IN: capacity; OUT: bytes written). */
#define AK_CU_JIT_ERROR_LOG_BUFFER 5
#define AK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6
/* The most kernel parameters a launch or a parameter query takes: the
 * kernelParams array lives on the C stack (AK_MAX_PARAMS pointers). CUDA's
 * parameter space (32 KiB at most) holds fewer 4-byte parameters than
 * this only for kernels no compiler emits. */
#define AK_MAX_PARAMS 1024

/* ak_load loads image (NUL-terminated where it is PTX) with the JIT error
 * log captured in log[0:loglen]: through cuLibraryLoadData when library is
 * set, else cuModuleLoadDataEx into context c. The handle comes back in
 * *lib or *mod. */
AK_FUNC CUresult ak_load(const ak_lib *l, CUcontext c, int library, const void *image, char *log, unsigned int loglen, CUlibrary *lib, CUmodule *mod) {
	int opts[2] = {AK_CU_JIT_ERROR_LOG_BUFFER, AK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)loglen};
	AK_USE(l, c);
	log[0] = 0;
	if (library) return AK_FN(l, cuLibraryLoadData)(lib, image, opts, vals, 2, NULL, NULL, 0);
	return AK_FN(l, cuModuleLoadDataEx)(mod, image, 2, opts, vals);
}

/* ak_get_kernel looks name up: cuLibraryGetKernel, whose CUkernel
 * cuLaunchKernel takes cast to CUfunction (launched in the stream's
 * context, or the current one on the NULL stream), else
 * cuModuleGetFunction. */
AK_FUNC CUresult ak_get_kernel(const ak_lib *l, CUcontext c, CUlibrary lib, CUmodule mod, const char *name, CUfunction *f) {
	AK_USE(l, c);
	if (lib != NULL) {
		CUkernel k = NULL;
		CUresult r = AK_FN(l, cuLibraryGetKernel)(&k, lib, name);
		*f = (CUfunction)k;
		return r;
	}
	return AK_FN(l, cuModuleGetFunction)(f, mod, name);
}

/* ak_param_info fills offs and sizes (max entries) with f's parameters,
 * by cuKernelGetParamInfo (library) or cuFuncGetParamInfo, and their count
 * in *n; max+1 means more than max. *known is 0 when the driver has no
 * such entry point. It asks index after index until
 * CUDA_ERROR_INVALID_VALUE, the documented answer to an index past the
 * last ("paramIndex must be less than the number of parameters"). */
AK_FUNC CUresult ak_param_info(const ak_lib *l, CUcontext c, int library, CUfunction f, unsigned int *offs, unsigned int *sizes, int max, int *n, int *known) {
	*n = 0;
	*known = library ? l->fn[AKI_cuKernelGetParamInfo] != NULL : l->fn[AKI_cuFuncGetParamInfo] != NULL;
	if (!*known) return 0;
	AK_USE(l, c);
	for (int i = 0; i <= max; i++) {
		size_t off = 0, size = 0;
		CUresult r = library ? AK_FN(l, cuKernelGetParamInfo)((CUkernel)f, (size_t)i, &off, &size)
		                     : AK_FN(l, cuFuncGetParamInfo)(f, (size_t)i, &off, &size);
		if (r == 1 /* CUDA_ERROR_INVALID_VALUE: past the last */) return 0;
		if (r != 0) return r;
		if (i < max) offs[i] = (unsigned int)off, sizes[i] = (unsigned int)size;
		*n = i + 1;
	}
	return 0;
}

/* ak_unload waits for all work of context c, so that nothing queued with
 * the module's kernels runs after it is gone (CUDA does not document that
 * an unload waits), then unloads. A failed wait (a poisoned context, whose
 * work will never run) does not stop the unload; it is reported when the
 * unload itself succeeds. */
AK_FUNC CUresult ak_unload(const ak_lib *l, CUcontext c, CUlibrary lib, CUmodule mod) {
	AK_USE(l, c);
	CUresult w = AK_FN(l, cuCtxSynchronize)();
	CUresult r = lib != NULL ? AK_FN(l, cuLibraryUnload)(lib) : AK_FN(l, cuModuleUnload)(mod);
	if (r != 0) return r;
	return w != 0 ? (w | AK_IN_CTXSYNC) : 0;
}

/* ak_launch builds the kernelParams array from the packed arguments (buf,
 * with the offset of each of the n values) and launches f on s, all in one
 * call: the driver copies the values before cuLaunchKernel returns. */
AK_FUNC CUresult ak_launch(const ak_lib *l, CUcontext c, CUfunction f,
                           unsigned int gx, unsigned int gy, unsigned int gz,
                           unsigned int bx, unsigned int by, unsigned int bz,
                           unsigned int shared, CUstream s,
                           const unsigned char *buf, const unsigned int *offs, int n) {
	void *params[AK_MAX_PARAMS];
	if (n < 0 || n > AK_MAX_PARAMS) return 1; /* CUDA_ERROR_INVALID_VALUE */
	AK_USE(l, c);
	for (int i = 0; i < n; i++) params[i] = (void *)(buf + offs[i]);
	return AK_FN(l, cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, s, n > 0 ? params : NULL, NULL);
}

/* ak_raw_launch_loop is the baseline of the launch benchmarks: count
 * cuLaunchKernel calls of f with the same configuration and arguments,
 * after one context step and one kernelParams build, as a C program's
 * launch loop. */
AK_FUNC CUresult ak_raw_launch_loop(const ak_lib *l, CUcontext c, CUfunction f, long count,
                                    unsigned int gx, unsigned int gy, unsigned int gz,
                                    unsigned int bx, unsigned int by, unsigned int bz,
                                    unsigned int shared, CUstream s,
                                    const unsigned char *buf, const unsigned int *offs, int n) {
	void *params[AK_MAX_PARAMS];
	if (n < 0 || n > AK_MAX_PARAMS) return 1;
	AK_USE(l, c);
	for (int i = 0; i < n; i++) params[i] = (void *)(buf + offs[i]);
	for (long i = 0; i < count; i++) {
		CUresult r = AK_FN(l, cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shared, s, n > 0 ? params : NULL, NULL);
		if (r != 0) return r;
	}
	return 0;
}

/* ---- measurement ----------------------------------------------------------- */

/* ak_raw_loop makes n raw driver calls of one kind inside one cgo call,
 * after one context step: the driver's own cost per call, which the
 * benchmarks set beside the shim's (see measure.go). */
enum { AK_RAW_CTX_GET, AK_RAW_EVENT_QUERY, AK_RAW_STREAM_QUERY, AK_RAW_EVENT_RECORD, AK_RAW_MALLOC_FREE };

AK_FUNC CUresult ak_raw_loop(const ak_lib *l, CUcontext c, int op, long n, CUevent e, CUstream s, size_t size) {
	AK_USE(l, c);
	for (long i = 0; i < n; i++) {
		CUresult r = 0;
		CUcontext cur;
		CUdeviceptr p;
		switch (op) {
		case AK_RAW_CTX_GET: r = AK_FN(l, cuCtxGetCurrent)(&cur); break;
		case AK_RAW_EVENT_QUERY: r = AK_FN(l, cuEventQuery)(e); break;
		case AK_RAW_STREAM_QUERY: r = AK_FN(l, cuStreamQuery)(s); break;
		case AK_RAW_EVENT_RECORD: r = AK_FN(l, cuEventRecord)(e, s); break;
		case AK_RAW_MALLOC_FREE:
			r = AK_FN(l, cuMemAlloc_v2)(&p, size);
			if (r == 0) r = AK_FN(l, cuMemFree_v2)(p);
			break;
		default: return 1; /* CUDA_ERROR_INVALID_VALUE */
		}
		if (r != 0 && r != 600 /* CUDA_ERROR_NOT_READY */) return r;
	}
	return 0;
}

#endif
