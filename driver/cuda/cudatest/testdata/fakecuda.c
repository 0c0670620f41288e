/*
 * fakecuda: a fake libcuda for the tests of accelkit's driver/cuda shim.
 *
 * It exports the CUDA driver API entry points the shim dlsyms, with the real
 * signatures and CUresult codes, and serves host memory as device memory:
 *
 *   - two devices (FAKECUDA_DEVICES=n, 1..8), each with a primary context and
 *     a capacity (FAKECUDA_CAPACITY_MIB, default 1024) that cuMemAlloc_v2
 *     and cuMemCreate enforce with CUDA_ERROR_OUT_OF_MEMORY;
 *   - a current context per thread (thread-local, as in CUDA): calls that
 *     need one fail with CUDA_ERROR_INVALID_CONTEXT (201) when there is none;
 *   - device memory is malloc'ed; copies check that device ranges lie in live
 *     allocations or accessible VMM mappings (CUDA_ERROR_INVALID_VALUE);
 *   - VMM is real virtual memory: cuMemAddressReserve is a PROT_NONE mmap,
 *     cuMemCreate a memfd, cuMemMap a MAP_FIXED shared mapping,
 *     cuMemSetAccess an mprotect; the attribute
 *     CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is
 *     FAKECUDA_VMM (default 1) or fake_set_vmm;
 *   - streams run their work synchronously at enqueue; the flags given to
 *     cuStreamCreate, cuEventCreate, cuMemHostAlloc and
 *     cuMemHostRegister_v2 are recorded;
 *   - host registration as CUDA answers it: any byte range (no alignment),
 *     tracked process-wide; a range overlapping a registration of any
 *     context is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED (712), one
 *     overlapping cuMemHostAlloc memory CUDA_ERROR_INVALID_VALUE;
 *     cuMemHostUnregister of an interior pointer or of cuMemHostAlloc
 *     memory is CUDA_ERROR_INVALID_VALUE, of anything else not registered
 *     CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713); destroying a primary
 *     context drops its registrations; the attribute
 *     CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED is FAKECUDA_HOST_REGISTER
 *     (default 1);
 *   - every entry point counts its calls (fake_counter), and any entry point
 *     can be made to return a chosen code (fake_fail, or
 *     FAKECUDA_FAIL=name:code[:after[:times]],... read at load);
 *   - fault injection into queued work (fake_fail_stream): the work's
 *     failure surfaces at the next synchronising call and then poisons the
 *     context, as a faulting kernel does; fake_poison poisons it at once;
 *   - stream and event operations issued while another context is current
 *     count as "ctx_mismatch" (the shim must always make the right context
 *     current first);
 *   - modules and launches: cuLibraryLoadData and cuModuleLoadDataEx load
 *     PTX and fake cubins (see "modules, libraries and launches" below),
 *     refuse anything else as CUDA does (INVALID_IMAGE, INVALID_PTX,
 *     UNSUPPORTED_PTX_VERSION, NO_BINARY_FOR_GPU) with a log in the JIT
 *     error buffer, answer param info from the PTX signature, and
 *     cuLaunchKernel runs the reference kernels on the device memory in
 *     stream order; an out-of-bounds access (ILLEGAL_ADDRESS) or
 *     accelkit_fault's trap (LAUNCH_FAILED) fails the launch's work and
 *     poisons the context as fake_fail_stream does; launches count per
 *     path ("launch_library_kernel", "launch_module_function"), and an
 *     unload while launches of the module are not yet synchronised
 *     (cuCtxSynchronize) counts as "unload_before_sync".
 *
 * Symbols are left out at link time, not at run time: the tests link one
 * copy of the library per configuration with a version script that makes
 * the chosen symbols local. Each copy is a separate file without a soname,
 * so the dynamic loader gives every configuration its own instance (its own
 * globals) inside one test process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct CUctx_st {
	int dev;
	int refs;
	int active;
	int poison;      /* a context-poisoning CUresult every later call returns */
	int pending;     /* poison of failed work, surfacing at the next synchronisation */
	int arm_default; /* poison the context at the next work on stream 0 */
} *CUcontext;

typedef struct CUstream_st {
	CUcontext ctx;
	unsigned flags;
	int arm; /* poison the context with this code at the next work queued */
} *CUstream;

typedef struct CUevent_st {
	CUcontext ctx;
	unsigned flags;
	int recorded;
} *CUevent;

typedef struct { int type; int id; } CUmemLocation;
typedef struct {
	int type;
	int requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;
typedef struct { CUmemLocation location; int flags; } CUmemAccessDesc;

_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");

enum {
	SUCCESS = 0,
	E_INVALID_VALUE = 1,
	E_OUT_OF_MEMORY = 2,
	E_NOT_INITIALIZED = 3,
	E_INVALID_DEVICE = 101,
	E_INVALID_IMAGE = 200,
	E_INVALID_CONTEXT = 201,
	E_NO_BINARY_FOR_GPU = 209,
	E_INVALID_PTX = 218,
	E_UNSUPPORTED_PTX_VERSION = 222,
	E_INVALID_HANDLE = 400,
	E_NOT_FOUND = 500,
	E_NOT_READY = 600,
	E_ILLEGAL_ADDRESS = 700,
	E_PEER_ACCESS_ALREADY_ENABLED = 704,
	E_LAUNCH_FAILED = 719,
	E_HOST_MEMORY_ALREADY_REGISTERED = 712,
	E_HOST_MEMORY_NOT_REGISTERED = 713,
	E_NOT_SUPPORTED = 801,
};

#define EXPORT __attribute__((visibility("default")))
#define MAXDEV 8
#define GRANULARITY (2u << 20) /* as an H100 reports */
#define MAX_BLOCK 1024            /* threads per block, as an H100 */
#define MAX_SHARED (48u << 10)    /* dynamic shared memory per block without opt-in */
#define CC_MAJOR 9                /* compute capability 9.0 */
#define CC_MINOR 0
#define PTX_ISA_MAX 90            /* PTX ISA 9.0, CUDA 13.0's */

/* Every entry point, for counters and fault injection. */
#define FAKE_APIS(X) \
	X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuDeviceGetCount) \
	X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) \
	X(cuDeviceTotalMem_v2) X(cuDevicePrimaryCtxRetain) \
	X(cuDevicePrimaryCtxRelease_v2) X(cuCtxGetCurrent) X(cuCtxSetCurrent) \
	X(cuCtxSynchronize) X(cuMemGetInfo_v2) X(cuMemAlloc_v2) X(cuMemFree_v2) \
	X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) \
	X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) \
	X(cuMemsetD8Async) X(cuStreamCreate) X(cuStreamDestroy_v2) \
	X(cuStreamQuery) X(cuStreamSynchronize) X(cuStreamWaitEvent) \
	X(cuEventCreate) X(cuEventDestroy_v2) X(cuEventRecord) X(cuEventQuery) \
	X(cuEventSynchronize) X(cuMemGetAllocationGranularity) \
	X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) \
	X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) \
	X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuMemcpyPeerAsync) \
	X(cuMemHostRegister_v2) X(cuMemHostUnregister) \
	X(cuLibraryLoadData) X(cuLibraryGetKernel) X(cuLibraryUnload) \
	X(cuKernelGetParamInfo) X(cuModuleLoadDataEx) X(cuModuleGetFunction) \
	X(cuModuleUnload) X(cuFuncGetParamInfo) X(cuLaunchKernel)

enum {
#define X(n) F_##n,
	FAKE_APIS(X)
#undef X
	F_COUNT
};

static const char *const api_names[F_COUNT] = {
#define X(n) #n,
	FAKE_APIS(X)
#undef X
};

/* Extra counters that are not entry points. */
enum {
	C_CTX_MISMATCH, C_STREAM_BLOCKING, C_EVENT_TIMING, C_LAUNCH_LIBRARY,
	C_LAUNCH_MODULE, C_LAUNCH_NOT_RUN, C_UNLOAD_BEFORE_SYNC, C_EXTRA
};
static const char *const extra_names[C_EXTRA] = {
	"ctx_mismatch", "streams_without_non_blocking", "events_with_timing",
	"launch_library_kernel", "launch_module_function", "launches_not_executed",
	"unload_before_sync",
};

static long long calls[F_COUNT];
static long long extras[C_EXTRA];
static unsigned last_flags[F_COUNT];

/* Fault injection: entry n returns fail_code[n] for `times` calls (-1:
 * forever) once `after` more calls have passed. fail_code is read without
 * the lock on every call; the rest only when it is set. */
static int fail_code[F_COUNT];
static long long fail_after[F_COUNT];
static long long fail_times[F_COUNT];

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* guards everything below */
static int initialized;
static int ndev = 2;
static int vmm_attr = 1;
static int host_register_attr = 1;
static unsigned long long capacity = 1ull << 30;
static unsigned long long used[MAXDEV];
static struct CUctx_st ctxs[MAXDEV];
static int peer_enabled[MAXDEV][MAXDEV];
/* The current context lives in a pthread key rather than a __thread
 * variable: the tests load dozens of instances of this library into one
 * process, and that many TLS-bearing modules make glibc grow each thread's
 * DTV, which gcc 12's LeakSanitizer then misreads and crashes on at exit
 * ("Tracer caught signal 11" after "DTLS ... at" a bogus range) under
 * go test -asan. A key is per instance too, and leaves the DTV alone. */
static pthread_key_t current_key;
#define current ((CUcontext)pthread_getspecific(current_key))

/* Registries of live objects: handles are checked by lookup, never by
 * dereferencing a pointer that may be dangling. */
typedef struct { uintptr_t base; size_t size; int dev; int kind; int access; void *obj; } region;
enum { R_DEVICE, R_HOST, R_RESERVE, R_MAP, R_REGISTERED };
static region *regions;
static size_t nregions, capregions;
static void **objs; /* streams, events, VMM handles */
static size_t nobjs, capobjs;

typedef struct { int fd; size_t size; int dev; } memhandle;

static int lookup_name(const char *name) {
	for (int i = 0; i < F_COUNT; i++)
		if (strcmp(api_names[i], name) == 0) return i;
	return -1;
}

static CUresult inject(int f) {
	__atomic_add_fetch(&calls[f], 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&fail_code[f], __ATOMIC_RELAXED) == 0) return SUCCESS;
	CUresult rc = SUCCESS;
	pthread_mutex_lock(&mu);
	if (fail_code[f] != 0) {
		if (fail_after[f] > 0) {
			fail_after[f]--;
		} else if (fail_times[f] != 0) {
			rc = fail_code[f];
			if (fail_times[f] > 0 && --fail_times[f] == 0) fail_code[f] = 0;
		}
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

#define ENTER(n) do { CUresult rc_ = inject(F_##n); if (rc_ != SUCCESS) return rc_; } while (0)
#define NEED_INIT() do { if (!__atomic_load_n(&initialized, __ATOMIC_ACQUIRE)) return E_NOT_INITIALIZED; } while (0)
#define NEED_CTX() do { \
	NEED_INIT(); \
	if (current == NULL) return E_INVALID_CONTEXT; \
	int p_ = __atomic_load_n(&current->poison, __ATOMIC_ACQUIRE); \
	if (p_ != 0) return p_; \
} while (0)

static int add_region(uintptr_t base, size_t size, int dev, int kind, void *obj) {
	if (nregions == capregions) {
		size_t n = capregions ? 2 * capregions : 64;
		region *r = realloc(regions, n * sizeof *r);
		if (r == NULL) return -1;
		regions = r, capregions = n;
	}
	regions[nregions++] = (region){base, size, dev, kind, 0, obj};
	return 0;
}

static region *find_region(uintptr_t base, int kind) {
	for (size_t i = 0; i < nregions; i++)
		if (regions[i].base == base && regions[i].kind == kind) return &regions[i];
	return NULL;
}

static void drop_region(region *r) { *r = regions[--nregions]; }

/* in_device_memory reports whether [p, p+n) lies in device memory that may
 * be accessed: one allocation, or accessible VMM mappings end to end. */
static int in_device_memory(uintptr_t p, size_t n) {
	int ok = 0;
	pthread_mutex_lock(&mu);
	uintptr_t pos = p, end = p + n;
	if (end < p) goto out;
	while (pos < end) {
		region *hit = NULL;
		for (size_t i = 0; i < nregions; i++) {
			region *r = &regions[i];
			if ((r->kind == R_DEVICE || (r->kind == R_MAP && r->access)) &&
			    pos >= r->base && pos < r->base + r->size) { hit = r; break; }
		}
		if (hit == NULL) goto out;
		if (hit->kind == R_DEVICE) { ok = end <= hit->base + hit->size; goto out; }
		pos = hit->base + hit->size;
	}
	ok = 1;
out:
	pthread_mutex_unlock(&mu);
	return ok;
}

static int add_obj(void *o) {
	pthread_mutex_lock(&mu);
	if (nobjs == capobjs) {
		size_t n = capobjs ? 2 * capobjs : 64;
		void **a = realloc(objs, n * sizeof *a);
		if (a == NULL) { pthread_mutex_unlock(&mu); return -1; }
		objs = a, capobjs = n;
	}
	objs[nobjs++] = o;
	pthread_mutex_unlock(&mu);
	return 0;
}

static int has_obj_locked(void *o) {
	for (size_t i = 0; i < nobjs; i++)
		if (objs[i] == o) return 1;
	return 0;
}

static int has_obj(void *o) {
	pthread_mutex_lock(&mu);
	int ok = has_obj_locked(o);
	pthread_mutex_unlock(&mu);
	return ok;
}

static int drop_obj(void *o) {
	int ok = 0;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < nobjs; i++)
		if (objs[i] == o) { objs[i] = objs[--nobjs]; ok = 1; break; }
	pthread_mutex_unlock(&mu);
	return ok;
}

/* CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD (0x2) name default
 * streams by handle, as do 0 and the handles a foreign runtime passes; the
 * fake runs all three as the context's one default stream, and counts each
 * handle's uses (fake_default_stream_uses). */
static long long default_uses[3];
static int default_stream(CUstream s) {
	uintptr_t h = (uintptr_t)s;
	if (h > 2) return 0;
	__atomic_add_fetch(&default_uses[h], 1, __ATOMIC_RELAXED);
	return 1;
}

/* stream_ctx resolves a stream handle (0, 0x1, 0x2: the current context's
 * default stream) to its context, counting a mismatch with the current
 * context. */
static CUresult stream_ctx(CUstream s, CUcontext *out) {
	if (default_stream(s)) {
		if (current == NULL) return E_INVALID_CONTEXT;
		*out = current;
		return SUCCESS;
	}
	if (!has_obj(s)) return E_INVALID_HANDLE;
	if (s->ctx != current) __atomic_add_fetch(&extras[C_CTX_MISMATCH], 1, __ATOMIC_RELAXED);
	*out = s->ctx;
	return SUCCESS;
}

/* queue_work is called when work is queued on s in context c: an armed
 * stream fails that work, which (as a faulting kernel does in CUDA) poisons
 * the context; the enqueue itself succeeds, the failure shows later. */
static void queue_work(CUstream s, CUcontext c) {
	int code = 0;
	pthread_mutex_lock(&mu);
	if ((uintptr_t)s <= 2) code = c->arm_default, c->arm_default = 0;
	else code = s->arm, s->arm = 0;
	pthread_mutex_unlock(&mu);
	if (code != 0) __atomic_store_n(&c->pending, code, __ATOMIC_RELEASE);
}

/* SYNC_POINT surfaces the failure of queued work: as on a GPU, work runs
 * after its enqueue returned, and its fault shows at the next call that
 * waits for or queries work; from then on every call fails. */
#define SYNC_POINT() do { \
	if (current != NULL) { \
		int q_ = __atomic_load_n(&current->pending, __ATOMIC_ACQUIRE); \
		if (q_ != 0) __atomic_store_n(&current->poison, q_, __ATOMIC_RELEASE); \
	} \
} while (0)

static CUresult event_check(CUevent e) {
	if (!has_obj(e)) return E_INVALID_HANDLE;
	if (e->ctx != current) __atomic_add_fetch(&extras[C_CTX_MISMATCH], 1, __ATOMIC_RELAXED);
	return SUCCESS;
}

/* ---- fault injection from the environment ------------------------------ */


static void parse_fail_env(const char *spec) {
	char *dup = strdup(spec), *save = NULL;
	if (dup == NULL) return;
	for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char name[64];
		int code = 0;
		long long after = 0, times = -1;
		if (sscanf(tok, "%63[^:]:%d:%lld:%lld", name, &code, &after, &times) < 2) {
			fprintf(stderr, "fakecuda: FAKECUDA_FAIL entry %s: want name:code[:after[:times]]\n", tok);
			continue;
		}
		int f = lookup_name(name);
		if (f < 0) {
			fprintf(stderr, "fakecuda: FAKECUDA_FAIL: unknown entry point %s\n", name);
			continue;
		}
		fail_after[f] = after, fail_times[f] = times, fail_code[f] = code;
	}
	free(dup);
}

__attribute__((constructor)) static void fake_load(void) {
	const char *v;
	if (pthread_key_create(&current_key, NULL) != 0) abort();
	if ((v = getenv("FAKECUDA_DEVICES")) != NULL) {
		int n = atoi(v);
		if (n >= 1 && n <= MAXDEV) ndev = n;
	}
	if ((v = getenv("FAKECUDA_VMM")) != NULL) vmm_attr = atoi(v) != 0;
	if ((v = getenv("FAKECUDA_HOST_REGISTER")) != NULL) host_register_attr = atoi(v) != 0;
	if ((v = getenv("FAKECUDA_CAPACITY_MIB")) != NULL && atoll(v) > 0)
		capacity = (unsigned long long)atoll(v) << 20;
	if ((v = getenv("FAKECUDA_FAIL")) != NULL) parse_fail_env(v);
	for (int i = 0; i < MAXDEV; i++) ctxs[i].dev = i;
}

/* ---- test controls -------------------------------------------------------- */

/* fake_counter returns how often entry point name was called, or an extra
 * counter ("ctx_mismatch", "streams_without_non_blocking",
 * "events_with_timing"); -1 for an unknown name. */
EXPORT long long fake_counter(const char *name) {
	int f = lookup_name(name);
	if (f >= 0) return __atomic_load_n(&calls[f], __ATOMIC_RELAXED);
	for (int i = 0; i < C_EXTRA; i++)
		if (strcmp(extra_names[i], name) == 0) return __atomic_load_n(&extras[i], __ATOMIC_RELAXED);
	return -1;
}

/* fake_last_flags returns the flags of the last call of cuStreamCreate,
 * cuEventCreate, cuMemHostAlloc or cuMemHostRegister_v2. */
EXPORT unsigned fake_last_flags(const char *name) {
	int f = lookup_name(name);
	return f < 0 ? 0 : __atomic_load_n(&last_flags[f], __ATOMIC_RELAXED);
}

/* fake_fail makes entry point name return code for `times` calls (-1:
 * forever) after `after` successful calls; code 0 clears. Returns -1 for an
 * unknown name. */
EXPORT int fake_fail(const char *name, int code, long long after, long long times) {
	int f = lookup_name(name);
	if (f < 0) return -1;
	pthread_mutex_lock(&mu);
	fail_after[f] = after, fail_times[f] = times;
	__atomic_store_n(&fail_code[f], code, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&mu);
	return 0;
}

EXPORT void fake_set_vmm(int on) {
	pthread_mutex_lock(&mu);
	vmm_attr = on != 0;
	pthread_mutex_unlock(&mu);
}

/* fake_ptr_device returns the device of the allocation starting at p, or -1. */
EXPORT int fake_ptr_device(unsigned long long p) {
	pthread_mutex_lock(&mu);
	region *r = find_region((uintptr_t)p, R_DEVICE);
	int dev = r ? r->dev : -1;
	pthread_mutex_unlock(&mu);
	return dev;
}

/* fake_live returns the number of live device allocations (kind 0), host
 * allocations (1), reservations (2), mappings (3) or host registrations
 * (4). */
EXPORT long long fake_live(int kind) {
	long long n = 0;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < nregions; i++) n += regions[i].kind == kind;
	pthread_mutex_unlock(&mu);
	return n;
}

/* fake_fail_stream arms stream s of device dev's primary context (s 0: its
 * default stream): the next work queued on it fails and poisons the context
 * with code. Returns -1 for an unknown stream or device. */
EXPORT int fake_fail_stream(int dev, CUstream s, int code) {
	int rc = 0;
	pthread_mutex_lock(&mu);
	if (dev < 0 || dev >= ndev) rc = -1;
	else if (s == NULL) ctxs[dev].arm_default = code;
	else if (!has_obj_locked(s)) rc = -1;
	else s->arm = code;
	pthread_mutex_unlock(&mu);
	return rc;
}

/* fake_poison poisons device dev's primary context now, as a fault of
 * earlier work would: every later call in it returns code. */
EXPORT int fake_poison(int dev, int code) {
	if (dev < 0 || dev >= ndev) return -1;
	__atomic_store_n(&ctxs[dev].poison, code, __ATOMIC_RELEASE);
	return 0;
}

/* fake_current_device returns the device of the calling thread's current
 * context, or -1. */
EXPORT int fake_current_device(void) { return current ? current->dev : -1; }

/* ---- initialisation, devices, contexts ---------------------------------- */

EXPORT CUresult cuInit(unsigned int flags) {
	ENTER(cuInit);
	if (flags != 0) return E_INVALID_VALUE;
	__atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
	return SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *v) {
	ENTER(cuDriverGetVersion);
	if (v == NULL) return E_INVALID_VALUE;
	*v = 13000;
	return SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult code, const char **s) {
	ENTER(cuGetErrorName);
	if (s == NULL) return E_INVALID_VALUE;
	switch (code) {
	case 0: *s = "CUDA_SUCCESS"; return SUCCESS;
	case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return SUCCESS;
	case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return SUCCESS;
	case 999: *s = "CUDA_ERROR_UNKNOWN"; return SUCCESS;
	case 4242: *s = "CUDA_ERROR_FAKE_4242"; return SUCCESS; /* a code only the fake knows */
	}
	*s = NULL;
	return E_INVALID_VALUE;
}

EXPORT CUresult cuDeviceGetCount(int *n) {
	ENTER(cuDeviceGetCount);
	NEED_INIT();
	if (n == NULL) return E_INVALID_VALUE;
	*n = ndev;
	return SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	ENTER(cuDeviceGet);
	NEED_INIT();
	if (d == NULL) return E_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= ndev) return E_INVALID_DEVICE;
	*d = ordinal;
	return SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	ENTER(cuDeviceGetName);
	NEED_INIT();
	if (d < 0 || d >= ndev) return E_INVALID_DEVICE;
	if (name == NULL || len <= 0) return E_INVALID_VALUE;
	snprintf(name, (size_t)len, "Fake CUDA Device %d", d);
	return SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	ENTER(cuDeviceGetAttribute);
	NEED_INIT();
	if (d < 0 || d >= ndev) return E_INVALID_DEVICE;
	if (v == NULL) return E_INVALID_VALUE;
	switch (attr) {
	case 1: *v = MAX_BLOCK; break;   /* MAX_THREADS_PER_BLOCK */
	case 8: *v = MAX_SHARED; break;  /* MAX_SHARED_MEMORY_PER_BLOCK */
	case 16: *v = 132; break;  /* MULTIPROCESSOR_COUNT */
	case 75: *v = 9; break;    /* COMPUTE_CAPABILITY_MAJOR */
	case 76: *v = 0; break;    /* COMPUTE_CAPABILITY_MINOR */
	case 99: *v = host_register_attr; break; /* HOST_REGISTER_SUPPORTED */
	case 102:                  /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
		pthread_mutex_lock(&mu);
		*v = vmm_attr;
		pthread_mutex_unlock(&mu);
		break;
	default: *v = 0;
	}
	return SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
	ENTER(cuDeviceTotalMem_v2);
	NEED_INIT();
	if (d < 0 || d >= ndev) return E_INVALID_DEVICE;
	if (bytes == NULL) return E_INVALID_VALUE;
	*bytes = capacity;
	return SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	ENTER(cuDevicePrimaryCtxRetain);
	NEED_INIT();
	if (d < 0 || d >= ndev) return E_INVALID_DEVICE;
	if (c == NULL) return E_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	ctxs[d].refs++;
	ctxs[d].active = 1;
	pthread_mutex_unlock(&mu);
	*c = &ctxs[d];
	return SUCCESS;
}

static void drop_modules_locked(CUcontext c);

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	ENTER(cuDevicePrimaryCtxRelease_v2);
	NEED_INIT();
	if (d < 0 || d >= ndev) return E_INVALID_DEVICE;
	CUresult rc = SUCCESS;
	pthread_mutex_lock(&mu);
	if (ctxs[d].refs == 0) rc = E_INVALID_CONTEXT;
	else if (--ctxs[d].refs == 0) { /* destroyed, with its host registrations */
		ctxs[d].active = 0, ctxs[d].poison = 0, ctxs[d].pending = 0, ctxs[d].arm_default = 0;
		drop_modules_locked(&ctxs[d]);
		for (size_t i = 0; i < nregions;) {
			if (regions[i].kind == R_REGISTERED && regions[i].dev == d) drop_region(&regions[i]);
			else i++;
		}
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *c) {
	ENTER(cuCtxGetCurrent);
	NEED_INIT();
	if (c == NULL) return E_INVALID_VALUE;
	*c = current;
	return SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
	ENTER(cuCtxSetCurrent);
	NEED_INIT();
	if (c != NULL && (c < &ctxs[0] || c >= &ctxs[ndev] || !c->active)) return E_INVALID_CONTEXT;
	if (pthread_setspecific(current_key, c) != 0) return E_OUT_OF_MEMORY;
	return SUCCESS;
}

static void synced(int dev);

EXPORT CUresult cuCtxSynchronize(void) {
	ENTER(cuCtxSynchronize);
	SYNC_POINT();
	NEED_CTX();
	synced(current->dev);
	return SUCCESS;
}

/* ---- memory --------------------------------------------------------------- */

EXPORT CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
	ENTER(cuMemGetInfo_v2);
	NEED_CTX();
	if (free_ == NULL || total == NULL) return E_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	*free_ = capacity - used[current->dev];
	*total = capacity;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

static CUresult charge(int dev, size_t n) {
	CUresult rc = SUCCESS;
	pthread_mutex_lock(&mu);
	if (n > capacity - used[dev]) rc = E_OUT_OF_MEMORY;
	else used[dev] += n;
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	ENTER(cuMemAlloc_v2);
	NEED_CTX();
	if (p == NULL || n == 0) return E_INVALID_VALUE;
	int dev = current->dev;
	CUresult rc = charge(dev, n);
	if (rc != SUCCESS) return rc;
	void *m = malloc(n);
	if (m == NULL) return E_OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	if (add_region((uintptr_t)m, n, dev, R_DEVICE, NULL) != 0) {
		used[dev] -= n;
		pthread_mutex_unlock(&mu);
		free(m);
		return E_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&mu);
	*p = (CUdeviceptr)(uintptr_t)m;
	return SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
	ENTER(cuMemFree_v2);
	NEED_CTX();
	pthread_mutex_lock(&mu);
	region *r = find_region((uintptr_t)p, R_DEVICE);
	if (r == NULL) {
		pthread_mutex_unlock(&mu);
		return E_INVALID_VALUE;
	}
	used[r->dev] -= r->size;
	drop_region(r);
	pthread_mutex_unlock(&mu);
	free((void *)(uintptr_t)p);
	return SUCCESS;
}

EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
	ENTER(cuMemHostAlloc);
	NEED_CTX();
	__atomic_store_n(&last_flags[F_cuMemHostAlloc], flags, __ATOMIC_RELAXED);
	if (p == NULL || n == 0 || (flags & ~0xFu) != 0) return E_INVALID_VALUE;
	void *m = NULL;
	if (posix_memalign(&m, 4096, n) != 0) return E_OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	int bad = add_region((uintptr_t)m, n, current->dev, R_HOST, NULL);
	pthread_mutex_unlock(&mu);
	if (bad) { free(m); return E_OUT_OF_MEMORY; }
	*p = m;
	return SUCCESS;
}

EXPORT CUresult cuMemFreeHost(void *p) {
	ENTER(cuMemFreeHost);
	NEED_CTX();
	pthread_mutex_lock(&mu);
	region *r = find_region((uintptr_t)p, R_HOST);
	if (r == NULL) {
		pthread_mutex_unlock(&mu);
		return E_INVALID_VALUE;
	}
	drop_region(r);
	pthread_mutex_unlock(&mu);
	free(p);
	return SUCCESS;
}

/* overlap_locked returns a region of kind that overlaps [p, p+n), or NULL. */
static region *overlap_locked(uintptr_t p, size_t n, int kind) {
	for (size_t i = 0; i < nregions; i++) {
		region *r = &regions[i];
		if (r->kind == kind && p < r->base + r->size && r->base < p + n) return r;
	}
	return NULL;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
	ENTER(cuMemHostRegister_v2);
	NEED_CTX();
	__atomic_store_n(&last_flags[F_cuMemHostRegister_v2], flags, __ATOMIC_RELAXED);
	if (p == NULL || n == 0 || (flags & ~0xFu) != 0 || (uintptr_t)p + n < (uintptr_t)p) return E_INVALID_VALUE;
	CUresult rc = SUCCESS;
	pthread_mutex_lock(&mu);
	if (overlap_locked((uintptr_t)p, n, R_REGISTERED) != NULL) rc = E_HOST_MEMORY_ALREADY_REGISTERED;
	else if (overlap_locked((uintptr_t)p, n, R_HOST) != NULL) rc = E_INVALID_VALUE;
	else if (add_region((uintptr_t)p, n, current->dev, R_REGISTERED, NULL) != 0) rc = E_OUT_OF_MEMORY;
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuMemHostUnregister(void *p) {
	ENTER(cuMemHostUnregister);
	NEED_CTX();
	if (p == NULL) return E_INVALID_VALUE;
	CUresult rc = E_HOST_MEMORY_NOT_REGISTERED;
	pthread_mutex_lock(&mu);
	region *r = find_region((uintptr_t)p, R_REGISTERED);
	if (r != NULL) drop_region(r), rc = SUCCESS;
	else if (overlap_locked((uintptr_t)p, 1, R_REGISTERED) != NULL || overlap_locked((uintptr_t)p, 1, R_HOST) != NULL)
		rc = E_INVALID_VALUE; /* an interior pointer, or cuMemHostAlloc memory */
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	ENTER(cuMemcpyHtoD_v2);
	SYNC_POINT();
	NEED_CTX();
	if (n == 0) return SUCCESS;
	if (src == NULL || !in_device_memory(dst, n)) return E_INVALID_VALUE;
	memcpy((void *)(uintptr_t)dst, src, n);
	return SUCCESS;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	ENTER(cuMemcpyDtoH_v2);
	SYNC_POINT();
	NEED_CTX();
	if (n == 0) return SUCCESS;
	if (dst == NULL || !in_device_memory(src, n)) return E_INVALID_VALUE;
	memcpy(dst, (void *)(uintptr_t)src, n);
	return SUCCESS;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
	ENTER(cuMemcpyHtoDAsync_v2);
	NEED_CTX();
	CUcontext c;
	CUresult rc = stream_ctx(s, &c);
	if (rc != SUCCESS) return rc;
	queue_work(s, c);
	if (n == 0) return SUCCESS;
	if (src == NULL || !in_device_memory(dst, n)) return E_INVALID_VALUE;
	memcpy((void *)(uintptr_t)dst, src, n);
	return SUCCESS;
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
	ENTER(cuMemcpyDtoHAsync_v2);
	NEED_CTX();
	CUcontext c;
	CUresult rc = stream_ctx(s, &c);
	if (rc != SUCCESS) return rc;
	queue_work(s, c);
	if (n == 0) return SUCCESS;
	if (dst == NULL || !in_device_memory(src, n)) return E_INVALID_VALUE;
	memcpy(dst, (void *)(uintptr_t)src, n);
	return SUCCESS;
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
	ENTER(cuMemcpyDtoDAsync_v2);
	NEED_CTX();
	CUcontext c;
	CUresult rc = stream_ctx(s, &c);
	if (rc != SUCCESS) return rc;
	queue_work(s, c);
	if (n == 0) return SUCCESS;
	if (!in_device_memory(dst, n) || !in_device_memory(src, n)) return E_INVALID_VALUE;
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	return SUCCESS;
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
	ENTER(cuMemsetD8Async);
	NEED_CTX();
	CUcontext c;
	CUresult rc = stream_ctx(s, &c);
	if (rc != SUCCESS) return rc;
	queue_work(s, c);
	if (n == 0) return SUCCESS;
	if (!in_device_memory(dst, n)) return E_INVALID_VALUE;
	memset((void *)(uintptr_t)dst, v, n);
	return SUCCESS;
}

/* ---- streams and events --------------------------------------------------- */

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags) {
	ENTER(cuStreamCreate);
	NEED_CTX();
	__atomic_store_n(&last_flags[F_cuStreamCreate], flags, __ATOMIC_RELAXED);
	if (s == NULL || (flags & ~1u) != 0) return E_INVALID_VALUE;
	if ((flags & 1u) == 0) __atomic_add_fetch(&extras[C_STREAM_BLOCKING], 1, __ATOMIC_RELAXED);
	CUstream st = calloc(1, sizeof *st);
	if (st == NULL) return E_OUT_OF_MEMORY;
	st->ctx = current, st->flags = flags;
	if (add_obj(st) != 0) { free(st); return E_OUT_OF_MEMORY; }
	*s = st;
	return SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
	ENTER(cuStreamDestroy_v2);
	NEED_CTX();
	if (s == NULL) return E_INVALID_HANDLE;
	CUcontext c;
	CUresult rc = stream_ctx(s, &c);
	if (rc != SUCCESS) return rc;
	if (!drop_obj(s)) return E_INVALID_HANDLE;
	free(s);
	return SUCCESS;
}

EXPORT CUresult cuStreamQuery(CUstream s) {
	ENTER(cuStreamQuery);
	SYNC_POINT();
	NEED_CTX();
	CUcontext c;
	return stream_ctx(s, &c);
}

EXPORT CUresult cuStreamSynchronize(CUstream s) {
	ENTER(cuStreamSynchronize);
	SYNC_POINT();
	NEED_CTX();
	CUcontext c;
	return stream_ctx(s, &c);
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
	ENTER(cuStreamWaitEvent);
	NEED_CTX();
	CUcontext c;
	CUresult rc = stream_ctx(s, &c);
	if (rc != SUCCESS) return rc;
	if (!has_obj(e) || flags != 0) return flags != 0 ? E_INVALID_VALUE : E_INVALID_HANDLE;
	return SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) {
	ENTER(cuEventCreate);
	NEED_CTX();
	__atomic_store_n(&last_flags[F_cuEventCreate], flags, __ATOMIC_RELAXED);
	if (e == NULL || (flags & ~0xFu) != 0) return E_INVALID_VALUE;
	if ((flags & 2u) == 0) __atomic_add_fetch(&extras[C_EVENT_TIMING], 1, __ATOMIC_RELAXED);
	CUevent ev = calloc(1, sizeof *ev);
	if (ev == NULL) return E_OUT_OF_MEMORY;
	ev->ctx = current, ev->flags = flags;
	if (add_obj(ev) != 0) { free(ev); return E_OUT_OF_MEMORY; }
	*e = ev;
	return SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e) {
	ENTER(cuEventDestroy_v2);
	NEED_CTX();
	CUresult rc = event_check(e);
	if (rc != SUCCESS) return rc;
	if (!drop_obj(e)) return E_INVALID_HANDLE;
	free(e);
	return SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
	ENTER(cuEventRecord);
	NEED_CTX();
	CUresult rc = event_check(e);
	if (rc != SUCCESS) return rc;
	CUcontext c;
	if ((rc = stream_ctx(s, &c)) != SUCCESS) return rc;
	if (c != e->ctx) return E_INVALID_HANDLE; /* as CUDA: event and stream of one context */
	queue_work(s, c);
	e->recorded = 1;
	return SUCCESS;
}

EXPORT CUresult cuEventQuery(CUevent e) {
	ENTER(cuEventQuery);
	SYNC_POINT();
	NEED_CTX();
	return event_check(e);
}

EXPORT CUresult cuEventSynchronize(CUevent e) {
	ENTER(cuEventSynchronize);
	SYNC_POINT();
	NEED_CTX();
	return event_check(e);
}

/* ---- virtual memory management -------------------------------------------- */

static CUresult check_prop(const CUmemAllocationProp *prop) {
	if (prop == NULL || prop->type != 1 /* PINNED */ || prop->location.type != 1 /* DEVICE */)
		return E_INVALID_VALUE;
	if (prop->location.id < 0 || prop->location.id >= ndev) return E_INVALID_DEVICE;
	return SUCCESS;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option) {
	ENTER(cuMemGetAllocationGranularity);
	NEED_INIT();
	CUresult rc = check_prop(prop);
	if (rc != SUCCESS) return rc;
	if (g == NULL || (option != 0 && option != 1)) return E_INVALID_VALUE;
	*g = GRANULARITY;
	return SUCCESS;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags) {
	ENTER(cuMemAddressReserve);
	NEED_INIT();
	(void)addr; /* a hint, as in CUDA */
	if (p == NULL || size == 0 || size % GRANULARITY != 0 || flags != 0) return E_INVALID_VALUE;
	if (align == 0) align = GRANULARITY;
	if ((align & (align - 1)) != 0) return E_INVALID_VALUE;
	size_t span = size + align;
	char *m = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) return E_OUT_OF_MEMORY;
	uintptr_t base = ((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1);
	if (base > (uintptr_t)m) munmap(m, base - (uintptr_t)m);
	uintptr_t end = (uintptr_t)m + span;
	if (end > base + size) munmap((void *)(base + size), end - (base + size));
	pthread_mutex_lock(&mu);
	int bad = add_region(base, size, -1, R_RESERVE, NULL);
	pthread_mutex_unlock(&mu);
	if (bad) { munmap((void *)base, size); return E_OUT_OF_MEMORY; }
	*p = base;
	return SUCCESS;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t size) {
	ENTER(cuMemAddressFree);
	NEED_INIT();
	pthread_mutex_lock(&mu);
	region *r = find_region((uintptr_t)p, R_RESERVE);
	CUresult rc = SUCCESS;
	if (r == NULL || r->size != size) rc = E_INVALID_VALUE;
	else {
		for (size_t i = 0; i < nregions; i++)
			if (regions[i].kind == R_MAP && regions[i].base >= p && regions[i].base < p + size) {
				rc = E_INVALID_VALUE; /* still mapped */
				break;
			}
	}
	if (rc == SUCCESS) drop_region(r);
	pthread_mutex_unlock(&mu);
	if (rc == SUCCESS) munmap((void *)(uintptr_t)p, size);
	return rc;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop, unsigned long long flags) {
	ENTER(cuMemCreate);
	NEED_INIT();
	CUresult rc = check_prop(prop);
	if (rc != SUCCESS) return rc;
	if (h == NULL || size == 0 || size % GRANULARITY != 0 || flags != 0) return E_INVALID_VALUE;
	if ((rc = charge(prop->location.id, size)) != SUCCESS) return rc;
	memhandle *m = calloc(1, sizeof *m);
	int fd = memfd_create("fakecuda", MFD_CLOEXEC);
	if (m == NULL || fd < 0 || ftruncate(fd, (off_t)size) != 0 || add_obj(m) != 0) {
		if (fd >= 0) close(fd);
		free(m);
		pthread_mutex_lock(&mu);
		used[prop->location.id] -= size;
		pthread_mutex_unlock(&mu);
		return E_OUT_OF_MEMORY;
	}
	m->fd = fd, m->size = size, m->dev = prop->location.id;
	*h = (CUmemGenericAllocationHandle)(uintptr_t)m;
	return SUCCESS;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
	ENTER(cuMemRelease);
	NEED_INIT();
	memhandle *m = (memhandle *)(uintptr_t)h;
	if (!drop_obj(m)) return E_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	used[m->dev] -= m->size;
	pthread_mutex_unlock(&mu);
	close(m->fd); /* live mappings keep the memory, as in CUDA */
	free(m);
	return SUCCESS;
}

static int in_reservation_locked(uintptr_t p, size_t size) {
	for (size_t i = 0; i < nregions; i++) {
		region *r = &regions[i];
		if (r->kind == R_RESERVE && p >= r->base && p + size <= r->base + r->size) return 1;
	}
	return 0;
}

EXPORT CUresult cuMemMap(CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h, unsigned long long flags) {
	ENTER(cuMemMap);
	NEED_INIT();
	memhandle *m = (memhandle *)(uintptr_t)h;
	if (size == 0 || p % GRANULARITY != 0 || size % GRANULARITY != 0 || off % GRANULARITY != 0 || flags != 0)
		return E_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	CUresult rc = SUCCESS;
	if (!has_obj_locked(m) || off + size > m->size || !in_reservation_locked(p, size)) rc = E_INVALID_VALUE;
	for (size_t i = 0; rc == SUCCESS && i < nregions; i++) {
		region *r = &regions[i];
		if (r->kind == R_MAP && p < r->base + r->size && r->base < p + size) rc = 208; /* ALREADY_MAPPED */
	}
	if (rc == SUCCESS) {
		void *got = mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, m->fd, (off_t)off);
		if (got == MAP_FAILED || add_region(p, size, m->dev, R_MAP, m) != 0) rc = E_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t size) {
	ENTER(cuMemUnmap);
	NEED_INIT();
	if (size == 0) return E_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	CUresult rc = SUCCESS;
	/* As CUDA: the range must cover whole mappings. */
	for (size_t i = 0; i < nregions; i++) {
		region *r = &regions[i];
		if (r->kind == R_MAP && p < r->base + r->size && r->base < p + size &&
		    (r->base < p || r->base + r->size > p + size)) { rc = E_INVALID_VALUE; break; }
	}
	int found = 0;
	if (rc == SUCCESS) {
		for (size_t i = 0; i < nregions;) {
			region *r = &regions[i];
			if (r->kind == R_MAP && r->base >= p && r->base < p + size) { drop_region(r); found = 1; }
			else i++;
		}
		if (!found) rc = E_INVALID_VALUE;
		else mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count) {
	ENTER(cuMemSetAccess);
	NEED_INIT();
	if (desc == NULL || count != 1 || size == 0) return E_INVALID_VALUE;
	if (desc->location.type != 1 || desc->location.id < 0 || desc->location.id >= ndev || desc->flags != 3)
		return E_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	/* Every byte of the range must be mapped. */
	CUresult rc = SUCCESS;
	for (uintptr_t pos = p; pos < p + size && rc == SUCCESS;) {
		region *hit = NULL;
		for (size_t i = 0; i < nregions; i++)
			if (regions[i].kind == R_MAP && pos >= regions[i].base && pos < regions[i].base + regions[i].size) {
				hit = &regions[i];
				break;
			}
		if (hit == NULL) rc = E_INVALID_VALUE;
		else pos = hit->base + hit->size;
	}
	if (rc == SUCCESS && mprotect((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE) != 0) rc = E_INVALID_VALUE;
	if (rc == SUCCESS)
		for (size_t i = 0; i < nregions; i++)
			if (regions[i].kind == R_MAP && regions[i].base >= p && regions[i].base < p + size) regions[i].access = 1;
	pthread_mutex_unlock(&mu);
	return rc;
}

/* ---- peer access ---------------------------------------------------------- */

EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
	ENTER(cuDeviceCanAccessPeer);
	NEED_INIT();
	if (can == NULL) return E_INVALID_VALUE;
	if (d < 0 || d >= ndev || peer < 0 || peer >= ndev) return E_INVALID_DEVICE;
	*can = d != peer;
	return SUCCESS;
}

EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
	ENTER(cuCtxEnablePeerAccess);
	NEED_CTX();
	if (flags != 0) return E_INVALID_VALUE;
	if (peer < &ctxs[0] || peer >= &ctxs[ndev] || !peer->active) return E_INVALID_CONTEXT;
	if (peer == current) return E_INVALID_DEVICE;
	CUresult rc = SUCCESS;
	pthread_mutex_lock(&mu);
	if (peer_enabled[current->dev][peer->dev]) rc = E_PEER_ACCESS_ALREADY_ENABLED;
	peer_enabled[current->dev][peer->dev] = 1;
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s) {
	ENTER(cuMemcpyPeerAsync);
	NEED_CTX();
	CUcontext c;
	CUresult rc = stream_ctx(s, &c);
	if (rc != SUCCESS) return rc;
	queue_work(s, c);
	if (dctx < &ctxs[0] || dctx >= &ctxs[ndev] || sctx < &ctxs[0] || sctx >= &ctxs[ndev]) return E_INVALID_CONTEXT;
	if (n == 0) return SUCCESS;
	if (!in_device_memory(dst, n) || !in_device_memory(src, n)) return E_INVALID_VALUE;
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	return SUCCESS;
}

/* ---- modules, libraries and launches -------------------------------------- *
 *
 * An image is PTX text or a fake cubin: "\x7fELF", the line
 * "ACCELKIT-FAKE-CUBIN sm_XX", then PTX text. The fake reads the entries
 * (".entry NAME(" with its ".param" list) and keeps their parameter layout;
 * it runs the four reference kernels (accelkit_vector_add, accelkit_scale,
 * accelkit_reduce_sum, accelkit_fault) on the host-backed device memory
 * when their signature matches, in stream order (at enqueue, as all the
 * fake's stream work), and any other entry as no work, counted in
 * "launches_not_executed". */

#define MAXPARAMS 256
#define NAMELEN 256

typedef struct {
	char name[NAMELEN];
	int nparams;
	unsigned offs[MAXPARAMS], sizes[MAXPARAMS];
} entry;

struct image;
typedef struct func { struct image *img; int idx; } func; /* a CUkernel or a CUfunction */

typedef struct image {
	int library;         /* cuLibraryLoadData; else a module of ctx */
	CUcontext ctx;
	int n;
	entry *entries;
	func *funcs;
	int pending[MAXDEV]; /* launched in that device's context since its last cuCtxSynchronize */
	int running;         /* launches executing its code now */
	int dead;            /* unloaded while running: the last launch frees it */
} image;

static image **images; /* guarded by mu */
static size_t nimages, capimages;

typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

static image *find_image_locked(void *h, int library) {
	for (size_t i = 0; i < nimages; i++)
		if ((void *)images[i] == h && images[i]->library == library) return images[i];
	return NULL;
}

/* find_func_locked resolves a CUkernel or CUfunction handle. */
static func *find_func_locked(void *h) {
	for (size_t i = 0; i < nimages; i++) {
		image *m = images[i];
		if (m->n > 0 && (func *)h >= m->funcs && (func *)h < m->funcs + m->n) return (func *)h;
	}
	return NULL;
}

static void free_image(image *m) {
	free(m->entries);
	free(m->funcs);
	free(m);
}

static void drop_image_locked(image *m) {
	for (size_t i = 0; i < nimages; i++)
		if (images[i] == m) { images[i] = images[--nimages]; break; }
	for (int d = 0; d < MAXDEV; d++)
		if (m->pending[d]) { __atomic_add_fetch(&extras[C_UNLOAD_BEFORE_SYNC], 1, __ATOMIC_RELAXED); break; }
	if (m->running > 0) m->dead = 1;
	else free_image(m);
}

static void drop_modules_locked(CUcontext c) {
	for (size_t i = 0; i < nimages;) {
		if (!images[i]->library && images[i]->ctx == c) {
			image *m = images[i];
			images[i] = images[--nimages];
			if (m->running > 0) m->dead = 1;
			else free_image(m);
		} else i++;
	}
}

static void synced(int dev) {
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < nimages; i++) images[i]->pending[dev] = 0;
	pthread_mutex_unlock(&mu);
}

/* fake_live_images returns the number of loaded libraries (library 1) or
 * modules (0). */
EXPORT long long fake_live_images(int library) {
	long long n = 0;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < nimages; i++) n += images[i]->library == (library != 0);
	pthread_mutex_unlock(&mu);
	return n;
}

/* jit_log writes the JIT error log into the buffer the JIT options name, as
 * the driver does: at most the given size with the NUL, and the size
 * option's value becomes the bytes written. */
static void jit_log(unsigned n, const int *opts, void **vals, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void jit_log(unsigned n, const int *opts, void **vals, const char *fmt, ...) {
	char *buf = NULL;
	size_t cap = 0;
	int sizeidx = -1;
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == 5) buf = vals[i];
		if (opts[i] == 6) cap = (size_t)(uintptr_t)vals[i], sizeidx = (int)i;
	}
	if (buf == NULL || cap == 0 || sizeidx < 0) return;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(buf, cap, fmt, ap);
	va_end(ap);
	size_t written = w < 0 ? 0 : ((size_t)w + 1 < cap ? (size_t)w + 1 : cap);
	vals[sizeidx] = (void *)(uintptr_t)written;
}

static CUresult check_jit_options(unsigned n, const int *opts, void **vals) {
	if (n == 0) return SUCCESS;
	if (opts == NULL || vals == NULL) return E_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++)
		if (opts[i] < 0 || opts[i] >= 34 /* CU_JIT_NUM_OPTIONS, CUDA 13.0 */) return E_INVALID_VALUE;
	return SUCCESS;
}

static int line_of(const char *text, const char *p) {
	int line = 1;
	for (const char *q = text; q < p; q++) line += *q == '\n';
	return line;
}

static const char *skip_space(const char *p) {
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
	return p;
}

static int ident_char(char c) {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '.';
}

/* scalar_size returns the bytes of a PTX parameter type, or 0. */
static unsigned scalar_size(const char *t, size_t n) {
	static const struct { const char *name; unsigned size; } types[] = {
		{".u8", 1}, {".s8", 1}, {".b8", 1}, {".u16", 2}, {".s16", 2}, {".b16", 2}, {".f16", 2},
		{".u32", 4}, {".s32", 4}, {".b32", 4}, {".f32", 4},
		{".u64", 8}, {".s64", 8}, {".b64", 8}, {".f64", 8},
	};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strlen(types[i].name) == n && strncmp(types[i].name, t, n) == 0) return types[i].size;
	return 0;
}

/* parse_params reads one entry's parameter list, p just after "(". It
 * returns the position after ")" or NULL with the offending position in
 * *bad. */
static const char *parse_params(const char *p, entry *e, const char **bad) {
	unsigned off = 0;
	p = skip_space(p);
	if (*p == ')') return p + 1;
	for (;;) {
		p = skip_space(p);
		*bad = p;
		if (strncmp(p, ".param", 6) != 0) return NULL;
		p = skip_space(p + 6);
		unsigned align = 0, size = 0, count = 1;
		if (strncmp(p, ".align", 6) == 0) {
			char *end;
			align = (unsigned)strtoul(p + 6, &end, 10);
			if (end == p + 6 || align == 0 || (align & (align - 1)) != 0) return NULL;
			p = skip_space(end);
		}
		const char *t = p;
		while (ident_char(*p)) p++;
		size = scalar_size(t, (size_t)(p - t));
		if (size == 0) return NULL;
		p = skip_space(p);
		while (*p == '.') { /* qualifiers such as .ptr .global .align N */
			while (ident_char(*p)) p++;
			p = skip_space(p);
			if (*p >= '0' && *p <= '9') { while (*p >= '0' && *p <= '9') p++; p = skip_space(p); }
		}
		const char *name = p;
		while (ident_char(*p)) p++;
		if (p == name) return NULL;
		if (*p == '[') {
			char *end;
			count = (unsigned)strtoul(p + 1, &end, 10);
			if (end == p + 1 || *end != ']' || count == 0 || count > 32768) return NULL;
			p = end + 1;
		}
		if (align == 0) align = size;
		if (e->nparams == MAXPARAMS) return NULL;
		off = (off + align - 1) & ~(align - 1);
		e->offs[e->nparams] = off;
		e->sizes[e->nparams] = size * count;
		e->nparams++;
		off += size * count;
		p = skip_space(p);
		if (*p == ')') return p + 1;
		*bad = p;
		if (*p != ',') return NULL;
		p++;
	}
}

/* parse_entries reads every ".entry" of PTX text into *out. On bad input
 * it returns E_INVALID_PTX with the reason in log. */
static CUresult parse_entries(const char *text, entry **out, int *n, char *log, size_t loglen) {
	*out = NULL, *n = 0;
	int cap = 0;
	for (const char *p = strstr(text, ".entry"); p != NULL; p = strstr(p, ".entry")) {
		if (p > text && ident_char(p[-1])) { p += 6; continue; }
		p = skip_space(p + 6);
		const char *name = p;
		while (ident_char(*p)) p++;
		if (p == name || p - name >= NAMELEN) {
			snprintf(log, loglen, "ptxas application ptx input, line %d; error   : syntax error: .entry without a valid name", line_of(text, name));
			free(*out);
			return E_INVALID_PTX;
		}
		if (*n == cap) {
			cap = cap ? 2 * cap : 8;
			entry *a = realloc(*out, (size_t)cap * sizeof *a);
			if (a == NULL) { free(*out); return E_OUT_OF_MEMORY; }
			*out = a;
		}
		entry *e = &(*out)[*n];
		memset(e, 0, sizeof *e);
		memcpy(e->name, name, (size_t)(p - name));
		p = skip_space(p);
		if (*p == '(') {
			const char *bad = p;
			const char *end = parse_params(p + 1, e, &bad);
			if (end == NULL) {
				snprintf(log, loglen, "ptxas application ptx input, line %d; error   : syntax error in the parameter list of %s", line_of(text, bad), e->name);
				free(*out);
				return E_INVALID_PTX;
			}
			p = end;
		}
		(*n)++;
	}
	return SUCCESS;
}

/* parse_image reads image into a new image, or fails as the driver does,
 * with a JIT log for PTX errors. */
static CUresult parse_image(const void *code, image **out, char *log, size_t loglen) {
	const char *text = code;
	log[0] = 0;
	if (memcmp(text, "\x7f" "ELF", 4) == 0) {
		static const char tag[] = "ACCELKIT-FAKE-CUBIN sm_";
		if (strncmp(text + 4, tag, sizeof tag - 1) != 0) {
			snprintf(log, loglen, "fake libcuda: an ELF image that is not a fake cubin");
			return E_INVALID_IMAGE;
		}
		int sm = atoi(text + 4 + sizeof tag - 1);
		/* A cubin runs on its own major version at the same or a later minor. */
		if (sm / 10 != CC_MAJOR || sm % 10 > CC_MINOR) return E_NO_BINARY_FOR_GPU;
		const char *nl = strchr(text + 4, '\n');
		if (nl == NULL) return E_INVALID_IMAGE;
		text = nl + 1;
	} else if ((unsigned char)text[0] == 0x50 && (unsigned char)text[1] == 0xED && (unsigned char)text[2] == 0x55 && (unsigned char)text[3] == 0xBA) {
		snprintf(log, loglen, "fake libcuda: fatbin images are not modelled; load PTX or a fake cubin");
		return E_INVALID_IMAGE;
	} else {
		const char *v = strstr(text, ".version");
		if (v == NULL) {
			snprintf(log, loglen, "ptxas application ptx input, line 1; fatal   : not a PTX module: no .version directive");
			return E_INVALID_PTX;
		}
		int major = 0, minor = 0;
		if (sscanf(v + 8, " %d.%d", &major, &minor) != 2) {
			snprintf(log, loglen, "ptxas application ptx input, line %d; fatal   : malformed .version directive", line_of(text, v));
			return E_INVALID_PTX;
		}
		if (major * 10 + minor > PTX_ISA_MAX) {
			snprintf(log, loglen, "ptxas application ptx input, line %d; fatal   : Unsupported .version %d.%d; current version is '%d.%d'",
			         line_of(text, v), major, minor, PTX_ISA_MAX / 10, PTX_ISA_MAX % 10);
			return E_UNSUPPORTED_PTX_VERSION;
		}
		const char *t = strstr(text, ".target");
		int sm = 0;
		if (t != NULL && sscanf(t + 7, " sm_%d", &sm) == 1 && sm > CC_MAJOR * 10 + CC_MINOR) {
			snprintf(log, loglen, "ptxas application ptx input, line %d; error   : SM version specified by .target (sm_%d) is higher than the device's (sm_%d%d)",
			         line_of(text, t), sm, CC_MAJOR, CC_MINOR);
			return E_INVALID_PTX;
		}
	}
	image *m = calloc(1, sizeof *m);
	if (m == NULL) return E_OUT_OF_MEMORY;
	CUresult rc = parse_entries(text, &m->entries, &m->n, log, loglen);
	if (rc != SUCCESS) { free(m); return rc; }
	m->funcs = calloc((size_t)(m->n > 0 ? m->n : 1), sizeof *m->funcs);
	if (m->funcs == NULL) { free_image(m); return E_OUT_OF_MEMORY; }
	for (int i = 0; i < m->n; i++) m->funcs[i] = (func){m, i};
	*out = m;
	return SUCCESS;
}

static CUresult load(const void *code, unsigned n, int *opts, void **vals, int library, image **out) {
	CUresult rc = check_jit_options(n, opts, vals);
	if (rc != SUCCESS) return rc;
	char log[1024];
	rc = parse_image(code, out, log, sizeof log);
	if (rc != SUCCESS) {
		if (log[0] != 0) jit_log(n, opts, vals, "%s", log);
		return rc;
	}
	(*out)->library = library;
	(*out)->ctx = library ? NULL : current;
	pthread_mutex_lock(&mu);
	if (nimages == capimages) {
		size_t c = capimages ? 2 * capimages : 16;
		image **a = realloc(images, c * sizeof *a);
		if (a == NULL) { pthread_mutex_unlock(&mu); free_image(*out); return E_OUT_OF_MEMORY; }
		images = a, capimages = c;
	}
	images[nimages++] = *out;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

EXPORT CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, int *jitOptions, void **jitOptionsValues, unsigned numJitOptions,
                                  int *libraryOptions, void **libraryOptionValues, unsigned numLibraryOptions) {
	ENTER(cuLibraryLoadData);
	NEED_INIT();
	if (lib == NULL || code == NULL) return E_INVALID_VALUE;
	if (numLibraryOptions != 0 && (libraryOptions == NULL || libraryOptionValues == NULL)) return E_INVALID_VALUE;
	image *m;
	CUresult rc = load(code, numJitOptions, jitOptions, jitOptionsValues, 1, &m);
	if (rc == SUCCESS) *lib = (CUlibrary)m;
	return rc;
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *mod, const void *code, unsigned numOptions, int *options, void **optionValues) {
	ENTER(cuModuleLoadDataEx);
	NEED_CTX();
	if (mod == NULL || code == NULL) return E_INVALID_VALUE;
	image *m;
	CUresult rc = load(code, numOptions, options, optionValues, 0, &m);
	if (rc == SUCCESS) *mod = (CUmodule)m;
	return rc;
}

static CUresult get_func(void **out, void *h, int library, const char *name) {
	if (out == NULL || name == NULL) return E_INVALID_VALUE;
	CUresult rc = E_NOT_FOUND;
	pthread_mutex_lock(&mu);
	image *m = find_image_locked(h, library);
	if (m == NULL) rc = E_INVALID_HANDLE;
	else if (!library && m->ctx != current) rc = E_INVALID_CONTEXT;
	else
		for (int i = 0; i < m->n; i++)
			if (strcmp(m->entries[i].name, name) == 0) { *out = &m->funcs[i]; rc = SUCCESS; break; }
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name) {
	ENTER(cuLibraryGetKernel);
	NEED_INIT();
	return get_func((void **)k, lib, 1, name);
}

EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule mod, const char *name) {
	ENTER(cuModuleGetFunction);
	NEED_CTX();
	return get_func((void **)f, mod, 0, name);
}

static CUresult unload(void *h, int library) {
	CUresult rc = SUCCESS;
	pthread_mutex_lock(&mu);
	image *m = find_image_locked(h, library);
	if (m == NULL) rc = E_INVALID_HANDLE;
	else if (!library && m->ctx != current) rc = E_INVALID_CONTEXT;
	else drop_image_locked(m);
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuLibraryUnload(CUlibrary lib) {
	ENTER(cuLibraryUnload);
	NEED_INIT(); /* context-independent */
	return unload(lib, 1);
}

EXPORT CUresult cuModuleUnload(CUmodule mod) {
	ENTER(cuModuleUnload);
	NEED_CTX();
	return unload(mod, 0);
}

static CUresult param_info(void *h, int library, size_t idx, size_t *off, size_t *size) {
	if (off == NULL) return E_INVALID_VALUE;
	CUresult rc = SUCCESS;
	pthread_mutex_lock(&mu);
	func *f = find_func_locked(h);
	if (f == NULL || f->img->library != library) rc = E_INVALID_HANDLE;
	else if (idx >= (size_t)f->img->entries[f->idx].nparams) rc = E_INVALID_VALUE;
	else {
		*off = f->img->entries[f->idx].offs[idx];
		if (size != NULL) *size = f->img->entries[f->idx].sizes[idx];
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

EXPORT CUresult cuKernelGetParamInfo(CUkernel k, size_t idx, size_t *off, size_t *size) {
	ENTER(cuKernelGetParamInfo);
	NEED_INIT();
	return param_info(k, 1, idx, off, size);
}

EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t idx, size_t *off, size_t *size) {
	ENTER(cuFuncGetParamInfo);
	NEED_CTX();
	return param_info(f, 0, idx, off, size);
}

/* kernel_is reports whether e is the reference kernel name with exactly
 * the parameter sizes given (0-terminated). */
static int kernel_is(const entry *e, const char *name, const unsigned *sizes) {
	if (strcmp(e->name, name) != 0) return 0;
	int i = 0;
	for (; sizes[i] != 0; i++)
		if (i >= e->nparams || e->sizes[i] != sizes[i]) return 0;
	return i == e->nparams;
}

static uint64_t arg_u64(const unsigned char *pb, const entry *e, int i) { uint64_t v; memcpy(&v, pb + e->offs[i], 8); return v; }
static int32_t arg_i32(const unsigned char *pb, const entry *e, int i) { int32_t v; memcpy(&v, pb + e->offs[i], 4); return v; }
static float arg_f32(const unsigned char *pb, const entry *e, int i) { float v; memcpy(&v, pb + e->offs[i], 4); return v; }

/* run executes a reference kernel over the grid: every thread computes
 * i = blockIdx.x*blockDim.x + threadIdx.x (threads that differ only in y
 * or z repeat the work, as they would on a GPU). It returns the code the
 * launch faults with (0: none); a faulting launch touches no memory. */
static int run(const entry *e, const unsigned char *pb, unsigned long long threadsX, unsigned long long repeat) {
	static const unsigned vadd[] = {8, 8, 8, 4, 0}, scale[] = {8, 4, 4, 0}, reduce[] = {8, 8, 4, 0}, fault[] = {8, 0};
	if (kernel_is(e, "accelkit_fault", fault)) return E_LAUNCH_FAILED; /* trap; */
	if (kernel_is(e, "accelkit_vector_add", vadd)) {
		float *a = (float *)(uintptr_t)arg_u64(pb, e, 0), *b = (float *)(uintptr_t)arg_u64(pb, e, 1), *c = (float *)(uintptr_t)arg_u64(pb, e, 2);
		int32_t n = arg_i32(pb, e, 3);
		unsigned long long cnt = n > 0 ? ((unsigned long long)n < threadsX ? (unsigned long long)n : threadsX) : 0;
		if (cnt == 0) return 0;
		if (!in_device_memory((uintptr_t)a, cnt * 4) || !in_device_memory((uintptr_t)b, cnt * 4) || !in_device_memory((uintptr_t)c, cnt * 4))
			return E_ILLEGAL_ADDRESS;
		for (unsigned long long r = 0; r < repeat; r++)
			for (unsigned long long i = 0; i < cnt; i++) c[i] = a[i] + b[i];
		return 0;
	}
	if (kernel_is(e, "accelkit_scale", scale)) {
		float *x = (float *)(uintptr_t)arg_u64(pb, e, 0);
		float s = arg_f32(pb, e, 1);
		int32_t n = arg_i32(pb, e, 2);
		unsigned long long cnt = n > 0 ? ((unsigned long long)n < threadsX ? (unsigned long long)n : threadsX) : 0;
		if (cnt == 0) return 0;
		if (!in_device_memory((uintptr_t)x, cnt * 4)) return E_ILLEGAL_ADDRESS;
		for (unsigned long long r = 0; r < repeat; r++)
			for (unsigned long long i = 0; i < cnt; i++) x[i] *= s;
		return 0;
	}
	if (kernel_is(e, "accelkit_reduce_sum", reduce)) {
		float *x = (float *)(uintptr_t)arg_u64(pb, e, 0), *out = (float *)(uintptr_t)arg_u64(pb, e, 1);
		int32_t n = arg_i32(pb, e, 2);
		unsigned long long cnt = n > 0 ? ((unsigned long long)n < threadsX ? (unsigned long long)n : threadsX) : 0;
		if (cnt == 0) return 0;
		if (!in_device_memory((uintptr_t)x, cnt * 4) || !in_device_memory((uintptr_t)out, 4)) return E_ILLEGAL_ADDRESS;
		for (unsigned long long r = 0; r < repeat; r++)
			for (unsigned long long i = 0; i < cnt; i++) *out += x[i]; /* atomicAdd */
		return 0;
	}
	__atomic_add_fetch(&extras[C_LAUNCH_NOT_RUN], 1, __ATOMIC_RELAXED);
	return 0;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned shared, CUstream s, void **params, void **extra) {
	ENTER(cuLaunchKernel);
	NEED_CTX();
	CUcontext c;
	CUresult rc = stream_ctx(s, &c);
	if (rc != SUCCESS) return rc;
	if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || bx > MAX_BLOCK || by > MAX_BLOCK || bz > 64 ||
	    (unsigned long long)bx * by * bz > MAX_BLOCK || shared > MAX_SHARED || extra != NULL)
		return E_INVALID_VALUE;
	/* The parameter values, copied as the driver copies them at the call;
	 * 32764 bytes is CUDA's parameter space (CUDA 12.1, Volta and later). */
	unsigned char pb[32764];
	image *img = NULL;
	pthread_mutex_lock(&mu);
	func *fn = find_func_locked(f);
	if (fn == NULL) rc = E_INVALID_HANDLE;
	else if (!fn->img->library && fn->img->ctx != c) rc = E_INVALID_HANDLE; /* a function of another context */
	else {
		img = fn->img;
		img->running++; /* an unload meanwhile frees it after this launch */
		img->pending[c->dev] = 1;
	}
	pthread_mutex_unlock(&mu);
	if (rc != SUCCESS) return rc;
	const entry *e = &img->entries[fn->idx];
	unsigned end = e->nparams ? e->offs[e->nparams - 1] + e->sizes[e->nparams - 1] : 0;
	if ((e->nparams > 0 && params == NULL) || end > sizeof pb) rc = E_INVALID_VALUE;
	for (int i = 0; rc == SUCCESS && i < e->nparams; i++) {
		if (params[i] == NULL) rc = E_INVALID_VALUE;
		else memcpy(pb + e->offs[i], params[i], e->sizes[i]);
	}
	if (rc == SUCCESS) {
		__atomic_add_fetch(&extras[img->library ? C_LAUNCH_LIBRARY : C_LAUNCH_MODULE], 1, __ATOMIC_RELAXED);
		queue_work(s, c);
		/* Work queued after a fault never runs. */
		if (__atomic_load_n(&c->pending, __ATOMIC_ACQUIRE) == 0) {
			int fault = run(e, pb, (unsigned long long)gx * bx, (unsigned long long)gy * gz * by * bz);
			if (fault != 0) __atomic_store_n(&c->pending, fault, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_lock(&mu);
	if (--img->running == 0 && img->dead) free_image(img);
	pthread_mutex_unlock(&mu);
	return rc;
}

/* ---- foreign stream handles (driver/cuda's ForeignStream) ------------------ */

/* fake_default_stream_uses returns how often work, queries or events named
 * the default stream by handle h: 0 (NULL), 1 (CU_STREAM_LEGACY) or 2
 * (CU_STREAM_PER_THREAD); -1 for another h. */
EXPORT long long fake_default_stream_uses(int h) {
	if (h < 0 || h > 2) return -1;
	return __atomic_load_n(&default_uses[h], __ATOMIC_RELAXED);
}
