package main

// The Go exports the C entry points of capi.c call. Each recovers from a
// panic into the thread's last error: no Go panic crosses into the
// caller's C or C++ frames.

/*
#include <stdint.h>
#include <stdlib.h>

void ak_set_error(char *msg);
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/devalloc/capi"
)

// state is the process's library, opened by the first call with the
// configuration read then, once; an error opening it is every call's.
var state struct {
	once sync.Once
	l    *capi.Library
	err  error
}

func get() (*capi.Library, error) {
	state.once.Do(func() {
		cfg, err := devalloc.ConfigFromEnv()
		if err != nil {
			state.err = err
			return
		}
		state.l, state.err = capi.Open("", cfg)
	})
	return state.l, state.err
}

// setError makes err the calling thread's last error.
func setError(op string, err error) {
	C.ak_set_error(C.CString("accelkit: " + op + ": " + err.Error()))
}

// guard is deferred by every export: a panic becomes the thread's last
// error and the export returns its zero value, which means failure.
func guard(op string) {
	if r := recover(); r != nil {
		setError(op, fmt.Errorf("internal error (a bug in accelkit; please report it with this message): %v", r))
	}
}

//export akgoAlloc
func akgoAlloc(size C.size_t, device C.int, stream C.uintptr_t) (p C.uintptr_t) {
	defer guard("alloc")
	l, err := get()
	if err == nil {
		var q uintptr
		q, err = l.Alloc(uint64(size), int(device), uintptr(stream))
		p = C.uintptr_t(q)
	}
	if err != nil {
		setError("alloc", err)
	}
	return p
}

//export akgoFree
func akgoFree(p C.uintptr_t, size C.size_t, checkSize C.int, device C.int, stream C.uintptr_t) {
	defer guard("free")
	l, err := get()
	if err == nil {
		if checkSize != 0 {
			err = l.Free(uintptr(p), uint64(size), int(device), uintptr(stream))
		} else {
			err = l.FreeUnsized(uintptr(p), int(device), uintptr(stream))
		}
	}
	if err != nil {
		setError("free", err)
	}
}

//export akgoDeviceCount
func akgoDeviceCount() (n C.int) {
	n = -1
	defer guard("device count")
	l, err := get()
	if err != nil {
		setError("device count", err)
		return -1
	}
	return C.int(l.DeviceCount())
}

//export akgoStatsJSON
func akgoStatsJSON(device C.int, buf *C.char, n C.size_t) (r C.long) {
	r = -1
	defer guard("stats")
	l, err := get()
	var js []byte
	if err == nil {
		js, err = l.StatsJSON(int(device))
	}
	if err != nil {
		setError("stats", err)
		return -1
	}
	if buf != nil && n > 0 {
		dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
		k := copy(dst[:len(dst)-1], js)
		dst[k] = 0
	}
	return C.long(len(js))
}

// status runs op's work and turns its error into -1 and the last error.
func status(op string, fn func(l *capi.Library) error) C.int {
	l, err := get()
	if err == nil {
		err = fn(l)
	}
	if err != nil {
		setError(op, err)
		return -1
	}
	return 0
}

//export akgoEmptyCache
func akgoEmptyCache(device C.int) (r C.int) {
	r = -1
	defer guard("empty cache")
	return status("empty cache", func(l *capi.Library) error { return l.EmptyCache(int(device)) })
}

//export akgoSetMemoryFraction
func akgoSetMemoryFraction(f C.double, device C.int) (r C.int) {
	r = -1
	defer guard("set memory fraction")
	return status("set memory fraction", func(l *capi.Library) error { return l.SetMemoryFraction(float64(f), int(device)) })
}

//export akgoResetPeakStats
func akgoResetPeakStats(device C.int) (r C.int) {
	r = -1
	defer guard("reset peak stats")
	return status("reset peak stats", func(l *capi.Library) error { return l.ResetPeakStats(int(device)) })
}

//export akgoSnapshot
func akgoSnapshot(device C.int, path *C.char) (r C.int) {
	r = -1
	defer guard("snapshot")
	return status("snapshot", func(l *capi.Library) error {
		if path == nil {
			return fmt.Errorf("NULL path; give the file to write, e.g. snapshot.pickle")
		}
		return l.Snapshot(int(device), C.GoString(path))
	})
}

func main() {}
