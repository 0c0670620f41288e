/*
 * The C harness of devalloc/capi's tests: it links libaccelkit_alloc.so
 * and calls it as PyTorch's CUDAPluggableAllocator does (alloc with size,
 * device and a cudaStream_t; free with the same size, device and stream),
 * from threads the Go runtime did not start. The fake libcuda named by
 * ACCELKIT_LIBCUDA serves device memory as host memory, so the harness
 * also writes each block and checks that no other thread wrote it while it
 * was live. It plays the CUDA runtime's part as well: it retains each
 * device's primary context and creates streams of its own, through the
 * fake's entry points (dlopen of the same file: the same instance).
 *
 *   harness threads N ITERS   N threads at once, each on its own stream,
 *                             the legacy (0x1) and per-thread (0x2) ones
 *   harness bad               bad calls set the error and change nothing
 *   harness oom               out of memory after release-and-retry
 *   harness firstcall N       the cost of the first call on N new threads
 *
 * It prints "ok" (and figures) on success; on failure, the reason, exit 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelkit_alloc.h"

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

typedef int (*init_fn)(unsigned);
typedef int (*devget_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*setcur_fn)(void *);
typedef int (*screate_fn)(void **, unsigned);
typedef long long (*counter_fn)(const char *);
typedef long long (*uses_fn)(int);

static struct {
	init_fn init;
	devget_fn devget;
	retain_fn retain;
	setcur_fn setcur;
	screate_fn screate;
	counter_fn counter;
	uses_fn uses;
} cu;

static void *sym(void *h, const char *name) {
	void *f = dlsym(h, name);
	if (f == NULL) FAIL("fake libcuda lacks %s", name);
	return f;
}

static void load_runtime(void) {
	const char *path = getenv("ACCELKIT_LIBCUDA");
	if (path == NULL) FAIL("ACCELKIT_LIBCUDA is not set");
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) FAIL("dlopen %s: %s", path, dlerror());
	cu.init = sym(h, "cuInit");
	cu.devget = sym(h, "cuDeviceGet");
	cu.retain = sym(h, "cuDevicePrimaryCtxRetain");
	cu.setcur = sym(h, "cuCtxSetCurrent");
	cu.screate = sym(h, "cuStreamCreate");
	cu.counter = sym(h, "fake_counter");
	cu.uses = sym(h, "fake_default_stream_uses");
	if (cu.init(0) != 0) FAIL("cuInit failed");
}

/* runtime_stream makes device's primary context current on this thread,
 * as cudaSetDevice does, and creates a stream in it. */
static void *runtime_stream(int device) {
	int d;
	void *ctx = NULL, *s = NULL;
	if (cu.devget(&d, device) != 0 || cu.retain(&ctx, d) != 0 || cu.setcur(ctx) != 0)
		FAIL("cannot make device %d's primary context current", device);
	if (cu.screate(&s, 0) != 0) FAIL("cuStreamCreate failed");
	return s;
}

static const char *err(void) {
	const char *e = accelkit_last_error();
	return e ? e : "(no error set)";
}

/* stat reads one statistic of device from accelkit_stats_json. */
static long long stat(int device, const char *key) {
	char buf[16384], pat[128];
	long n = accelkit_stats_json(device, buf, sizeof buf);
	if (n < 0) FAIL("accelkit_stats_json: %s", err());
	if ((size_t)n >= sizeof buf) FAIL("stats JSON of %ld bytes does not fit", n);
	snprintf(pat, sizeof pat, "\"%s\":", key);
	char *p = strstr(buf, pat);
	if (p == NULL) FAIL("stats JSON lacks %s: %s", key, buf);
	return atoll(p + strlen(pat));
}

static double now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ---- threads ---------------------------------------------------------------- */

static int iters;

struct held { unsigned char *p; size_t size; void *stream; };

static void *worker(void *arg) {
	int id = (int)(intptr_t)arg;
	int device = id % 2;
	unsigned rnd = 0x9e3779b9u * (unsigned)(id + 1);
	void *own = runtime_stream(device);
	void *streams[4] = {own, NULL, (void *)0x1, (void *)0x2};
	struct held h[8] = {{0}};
	for (int i = 0; i < iters; i++) {
		int k = i % 8;
		if (h[k].p != NULL) {
			for (size_t j = 0; j < h[k].size; j += 97)
				if (h[k].p[j] != (unsigned char)id)
					FAIL("thread %d: block %p was written by another thread while live", id, (void *)h[k].p);
			accelkit_torch_free(h[k].p, h[k].size, device, h[k].stream);
			if (accelkit_last_error() != NULL) FAIL("thread %d: free: %s", id, err());
			h[k].p = NULL;
		}
		rnd = rnd * 1103515245u + 12345u;
		size_t size = 1 + (rnd >> 8) % (i % 5 == 0 ? (4u << 20) : 4096u);
		void *s = streams[(rnd >> 4) % 4];
		unsigned char *p = accelkit_torch_alloc(size, device, s);
		if (p == NULL) FAIL("thread %d: alloc %zu: %s", id, size, err());
		memset(p, id, size);
		h[k] = (struct held){p, size, s};
	}
	for (int k = 0; k < 8; k++)
		if (h[k].p != NULL) accelkit_torch_free(h[k].p, h[k].size, device, h[k].stream);
	return NULL;
}

static void run_threads(int n) {
	pthread_t t[64];
	if (n > 64) n = 64;
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) != 0) FAIL("pthread_create");
	for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
	for (int d = 0; d < 2 && d < n; d++) {
		if (stat(d, "allocated_bytes.all.current") != 0)
			FAIL("device %d: %lld bytes still allocated after every free", d, stat(d, "allocated_bytes.all.current"));
		if (stat(d, "allocation.all.allocated") == 0) FAIL("device %d: no allocation counted", d);
	}
	/* 0x1 is the legacy default stream, which accelkit names 0 to the
	 * driver; 0x2 is passed as it is, resolved by the driver per thread. */
	if (cu.uses(2) == 0) FAIL("the driver never saw the per-thread stream handle 0x2");
	if (cu.counter("cuStreamDestroy_v2") != 0) FAIL("accelkit destroyed a stream it does not own");
	if (cu.counter("ctx_mismatch") != 0) FAIL("%lld stream operations ran in the wrong context", cu.counter("ctx_mismatch"));
	if (accelkit_empty_cache(-1) != 0) FAIL("empty_cache: %s", err());
	if (stat(0, "reserved_bytes.all.current") != 0) FAIL("empty_cache left %lld bytes reserved", stat(0, "reserved_bytes.all.current"));
	printf("ok\n");
}

/* ---- bad calls ---------------------------------------------------------------- */

static void check_failed(const char *what, const char *want) {
	const char *e = accelkit_last_error();
	if (e == NULL) FAIL("%s: no error set", what);
	if (strstr(e, want) == NULL) FAIL("%s: error [%s] lacks [%s]", what, e, want);
}

static void run_bad(void) {
	void *s = runtime_stream(0);
	if (accelkit_device_count() != 2) FAIL("device count %d, want 2: %s", accelkit_device_count(), err());
	void *p = accelkit_torch_alloc(1000, 0, s);
	if (p == NULL) FAIL("alloc: %s", err());
	if (accelkit_last_error() != NULL) FAIL("a successful alloc left an error");
	long long allocated = stat(0, "allocated_bytes.all.current");

	accelkit_torch_free((char *)p + 512, 1000, 0, s);
	check_failed("free of an interior pointer", "not a live allocation");
	accelkit_torch_free(p, 999, 0, s);
	check_failed("free with a wrong size", "allocated with size 1000");
	accelkit_torch_free(p, 1000, 1, s);
	check_failed("free on another device", "allocated on device 0");
	accelkit_torch_free(p, 1000, 7, s);
	check_failed("free on a device that does not exist", "device 7 does not exist");
	if (accelkit_torch_alloc(1000, 7, s) != NULL) FAIL("alloc on device 7 returned memory");
	check_failed("alloc on a device that does not exist", "0 to 1");
	if (accelkit_torch_alloc(1000, -1, s) != NULL) FAIL("alloc on device -1 returned memory");
	if (accelkit_torch_alloc(1000, 0, (void *)0xdead0000) != NULL) FAIL("alloc on an unknown stream returned memory");
	check_failed("alloc on an unknown stream", "not a stream");
	if (accelkit_set_memory_fraction(1.5, 0) != -1) FAIL("memory fraction 1.5 accepted");
	check_failed("memory fraction 1.5", "(0, 1]");
	if (stat(0, "allocated_bytes.all.current") != allocated)
		FAIL("bad calls changed allocated bytes from %lld to %lld", allocated, stat(0, "allocated_bytes.all.current"));
	if (accelkit_last_error() != NULL) FAIL("a successful call did not clear the error");

	if (accelkit_torch_alloc(0, 0, s) != NULL || accelkit_last_error() != NULL) FAIL("alloc of 0 bytes: want NULL and no error");
	accelkit_torch_free(p, 1000, 0, s);
	if (accelkit_last_error() != NULL) FAIL("the right free after the bad ones: %s", err());
	accelkit_torch_free(p, 1000, 0, s);
	check_failed("double free", "double free");
	accelkit_torch_free(NULL, 0, 0, s);
	if (accelkit_last_error() != NULL) FAIL("free(NULL): %s", err());

	/* CuPy's CFunctionAllocator: malloc(param, size, device), free(param, ptr, device). */
	void *q = accelkit_cupy_malloc(NULL, 3 << 20, 1);
	if (q == NULL) FAIL("cupy malloc: %s", err());
	accelkit_cupy_free(NULL, q, 0);
	check_failed("cupy free on the wrong device", "allocated on device 1");
	accelkit_cupy_free(NULL, q, 1);
	if (accelkit_last_error() != NULL) FAIL("cupy free: %s", err());
	if (stat(1, "allocated_bytes.all.current") != 0) FAIL("cupy free left bytes allocated");
	printf("ok\n");
}

/* ---- out of memory ---------------------------------------------------------- */

static void run_oom(void) {
	/* FAKECUDA_CAPACITY_MIB=64: a 40 MiB block cached for stream a leaves
	 * too little for 40 MiB on stream b until the cache is released. */
	void *a = runtime_stream(0);
	void *b = runtime_stream(0);
	void *p = accelkit_torch_alloc(40 << 20, 0, a);
	if (p == NULL) FAIL("alloc 40 MiB: %s", err());
	accelkit_torch_free(p, 40 << 20, 0, a);
	void *q = accelkit_torch_alloc(40 << 20, 0, b);
	if (q == NULL) FAIL("alloc 40 MiB on another stream with 40 MiB cached: %s", err());
	void *r = accelkit_torch_alloc(100 << 20, 0, b);
	if (r != NULL) FAIL("alloc of 100 MiB on a 64 MiB device returned memory");
	check_failed("out of memory", "out of memory");
	if (stat(0, "num_ooms") != 1) FAIL("num_ooms %lld, want 1", stat(0, "num_ooms"));
	memset(q, 1, 40 << 20); /* still live and whole */
	accelkit_torch_free(q, 40 << 20, 0, b);
	if (accelkit_last_error() != NULL) FAIL("free after OOM: %s", err());
	printf("ok\n");
}

/* ---- first call on a new thread ------------------------------------------------ */

static double first_ns, steady_ns;

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void *first_call(void *arg) {
	(void)arg;
	double t0 = now_ns();
	void *p = accelkit_torch_alloc(4096, 0, NULL);
	accelkit_torch_free(p, 4096, 0, NULL);
	first_ns = now_ns() - t0;
	if (p == NULL) FAIL("alloc on a new thread: %s", err());
	enum { N = 2000 };
	static double d[N];
	for (int i = 0; i < N; i++) {
		t0 = now_ns();
		p = accelkit_torch_alloc(4096, 0, NULL);
		accelkit_torch_free(p, 4096, 0, NULL);
		d[i] = now_ns() - t0;
	}
	qsort(d, N, sizeof d[0], cmp_double);
	steady_ns = d[N / 2];
	return NULL;
}

static void run_firstcall(int n) {
	/* Warm the library up on the main thread: opening the driver is a
	 * one-time cost, not a new thread's. */
	void *p = accelkit_torch_alloc(4096, 0, NULL);
	accelkit_torch_free(p, 4096, 0, NULL);
	double *firsts = calloc(n, sizeof *firsts), steady = 0;
	for (int i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, first_call, NULL) != 0) FAIL("pthread_create");
		pthread_join(t, NULL);
		firsts[i] = first_ns;
		steady += steady_ns;
	}
	qsort(firsts, n, sizeof firsts[0], cmp_double);
	printf("first_pair_ns=%.0f steady_pair_ns=%.0f threads=%d\nok\n", firsts[n / 2], steady / n, n);
	free(firsts);
}

int main(int argc, char **argv) {
	if (argc < 2) FAIL("usage: harness threads N ITERS | bad | oom | firstcall N");
	load_runtime();
	if (strcmp(argv[1], "threads") == 0 && argc == 4) {
		iters = atoi(argv[3]);
		run_threads(atoi(argv[2]));
	} else if (strcmp(argv[1], "bad") == 0) {
		run_bad();
	} else if (strcmp(argv[1], "oom") == 0) {
		run_oom();
	} else if (strcmp(argv[1], "firstcall") == 0 && argc == 3) {
		run_firstcall(atoi(argv[2]));
	} else {
		FAIL("unknown mode %s", argv[1]);
	}
	return 0;
}
