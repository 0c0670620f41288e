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
 *     current first).
 *
 * Symbols are left out at link time, not at run time: the tests link one
 * copy of the library per configuration with a version script that makes
 * the chosen symbols local. Each copy is a separate file without a soname,
 * so the dynamic loader gives every configuration its own instance (its own
 * globals) inside one test process.
 */
#define _GNU_SOURCE
#include <errno.h>
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
	E_INVALID_CONTEXT = 201,
	E_INVALID_HANDLE = 400,
	E_NOT_READY = 600,
	E_PEER_ACCESS_ALREADY_ENABLED = 704,
	E_HOST_MEMORY_ALREADY_REGISTERED = 712,
	E_HOST_MEMORY_NOT_REGISTERED = 713,
	E_NOT_SUPPORTED = 801,
};

#define EXPORT __attribute__((visibility("default")))
#define MAXDEV 8
#define GRANULARITY (2u << 20) /* as an H100 reports */

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
	X(cuMemHostRegister_v2) X(cuMemHostUnregister)

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
enum { C_CTX_MISMATCH, C_STREAM_BLOCKING, C_EVENT_TIMING, C_EXTRA };
static const char *const extra_names[C_EXTRA] = {
	"ctx_mismatch", "streams_without_non_blocking", "events_with_timing",
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

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	ENTER(cuDevicePrimaryCtxRelease_v2);
	NEED_INIT();
	if (d < 0 || d >= ndev) return E_INVALID_DEVICE;
	CUresult rc = SUCCESS;
	pthread_mutex_lock(&mu);
	if (ctxs[d].refs == 0) rc = E_INVALID_CONTEXT;
	else if (--ctxs[d].refs == 0) { /* destroyed, with its host registrations */
		ctxs[d].active = 0, ctxs[d].poison = 0, ctxs[d].pending = 0, ctxs[d].arm_default = 0;
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

EXPORT CUresult cuCtxSynchronize(void) {
	ENTER(cuCtxSynchronize);
	SYNC_POINT();
	NEED_CTX();
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

/* ---- foreign stream handles (driver/cuda's ForeignStream) ------------------ */

/* fake_default_stream_uses returns how often work, queries or events named
 * the default stream by handle h: 0 (NULL), 1 (CU_STREAM_LEGACY) or 2
 * (CU_STREAM_PER_THREAD); -1 for another h. */
EXPORT long long fake_default_stream_uses(int h) {
	if (h < 0 || h > 2) return -1;
	return __atomic_load_n(&default_uses[h], __ATOMIC_RELAXED);
}
