//go:build linux && cgo

package cuda

// Streams accelkit does not own: a framework that loads accelkit into its
// process (PyTorch and CuPy through devalloc/capi) hands its own
// cudaStream_t values in. They are valid in the device's primary context,
// which the CUDA runtime uses and Open retains, so the same handle works
// in the shim's driver calls; accelkit records events on them and waits on
// them, and never destroys them.

/*
#include <stdint.h>
#include "shim.h"

// A handle from the caller is an integer to Go; converting it to a pointer
// type is C's business (go vet rightly flags uintptr to unsafe.Pointer).
static inline CUstream ak_foreign_handle(uintptr_t h) { return (CUstream)h; }
static inline uintptr_t ak_handle_value(CUstream s) { return (uintptr_t)s; }
*/
import "C"

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/accelkit/accelkit/driver"
)

// foreignKey names a foreign stream: the device, the handle, and for
// StreamPerThread the OS thread whose default stream it is.
type foreignKey struct {
	dev *device
	h   uintptr
	tid int
}

// foreignStreams maps foreignKey to *stream, so one handle is one stream
// (one stream ID, and so one pool of devalloc's) for the life of the
// process. It is package state rather than a device field: entries are a
// few words each and a framework uses a handful of streams.
var foreignStreams sync.Map

// ForeignStream returns the stream of dev that the caller's CUstream or
// cudaStream_t h names: a stream accelkit does not own. Work, events and
// waits go to h itself; Destroy refuses it, and closing the driver leaves
// it alone. The same h always returns the same stream, with one ID.
//
// h 0 and StreamLegacy are the device's legacy default stream, the one
// DefaultStream returns. StreamPerThread is the default stream of the
// calling OS thread, one stream per thread: call ForeignStream for it on
// the thread that will use it, with the goroutine locked to that thread
// (runtime.LockOSThread; a cgo callback from a C thread is), and use the
// stream from that thread only, because the driver resolves the handle on
// the thread that makes each call. A thread ID the kernel reuses after
// its thread exited names the old thread's stream.
//
// Any other h is checked once, at its first use, with cuStreamQuery in
// dev's primary context: an unknown handle is an error wrapping
// driver.ErrInvalidValue. A handle destroyed by its owner and handed out
// again by the driver for a new stream names the same accelkit stream.
func ForeignStream(dev driver.Device, h uintptr) (driver.Stream, error) {
	d := asDevice(dev)
	if d == nil {
		return nil, fmt.Errorf("cuda: ForeignStream: %T is not a device of the cuda backend: %w", dev, driver.ErrInvalidValue)
	}
	if err := d.state.Check("ForeignStream"); err != nil {
		return nil, err
	}
	if h == 0 || h == StreamLegacy {
		return d.defStream, nil
	}
	k := foreignKey{dev: d, h: h}
	if h == StreamPerThread {
		k.tid = syscall.Gettid()
	}
	if s, ok := foreignStreams.Load(k); ok {
		return s.(*stream), nil
	}
	if h != StreamPerThread {
		r := C.ak_stream_query(d.l, d.ctx, C.ak_foreign_handle(C.uintptr_t(h)))
		if r != 0 && r != errNotReady {
			return nil, fmt.Errorf("cuda device %d: ForeignStream %#x: not a stream of the device's primary context: %w: %w",
				d.ordinal, h, driver.ErrInvalidValue, d.result("cuStreamQuery", r))
		}
	}
	s, _ := foreignStreams.LoadOrStore(k, &stream{dev: d, h: C.ak_foreign_handle(C.uintptr_t(h)), id: d.nextStream.Add(1), foreign: true})
	return s.(*stream), nil
}

// IsForeign reports whether s is a stream ForeignStream returned for a
// handle other than 0 and StreamLegacy.
func IsForeign(s driver.Stream) bool {
	st, ok := s.(*stream)
	return ok && st.foreign
}

func (s *stream) foreignDestroyError() error {
	return fmt.Errorf("cuda device %d: Stream.Destroy: stream %d is the caller's (handle %#x, ForeignStream): accelkit never destroys it: %w",
		s.dev.ordinal, s.id, uintptr(C.ak_handle_value(s.h)), driver.ErrInvalidValue)
}
