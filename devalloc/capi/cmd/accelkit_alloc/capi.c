// The C entry points of accelkit_alloc.h: each clears the calling thread's
// last error and calls the Go export that does the work (exports.go). The
// error lives here, in C thread-local storage, because a C caller's
// thread is the only identity the error can have: Go code runs on that
// same thread during the call (a cgo callback is locked to it).

#include <stdint.h>
#include <stdlib.h>

#include "accelkit_alloc.h"
#include "_cgo_export.h"

static __thread char *ak_err;

// ak_set_error takes msg (malloc'ed by C.CString) as the thread's error.
void ak_set_error(char *msg) {
	free(ak_err);
	ak_err = msg;
}

static inline void ak_clear(void) {
	if (ak_err != NULL) {
		free(ak_err);
		ak_err = NULL;
	}
}

const char *accelkit_last_error(void) { return ak_err; }

void *accelkit_torch_alloc(size_t size, int device, void *stream) {
	ak_clear();
	return (void *)akgoAlloc(size, device, (uintptr_t)stream);
}

void accelkit_torch_free(void *ptr, size_t size, int device, void *stream) {
	ak_clear();
	akgoFree((uintptr_t)ptr, size, 1, device, (uintptr_t)stream);
}

void *accelkit_cupy_malloc(void *param, size_t size, int device) {
	ak_clear();
	return (void *)akgoAlloc(size, device, (uintptr_t)param);
}

void accelkit_cupy_free(void *param, void *ptr, int device) {
	ak_clear();
	akgoFree((uintptr_t)ptr, 0, 0, device, (uintptr_t)param);
}

int accelkit_device_count(void) {
	ak_clear();
	return akgoDeviceCount();
}

long accelkit_stats_json(int device, char *buf, size_t len) {
	ak_clear();
	return akgoStatsJSON(device, buf, len);
}

int accelkit_empty_cache(int device) {
	ak_clear();
	return akgoEmptyCache(device);
}

int accelkit_set_memory_fraction(double fraction, int device) {
	ak_clear();
	return akgoSetMemoryFraction(fraction, device);
}

int accelkit_reset_peak_stats(int device) {
	ak_clear();
	return akgoResetPeakStats(device);
}

int accelkit_snapshot(int device, const char *path) {
	ak_clear();
	return akgoSnapshot(device, (char *)path);
}
