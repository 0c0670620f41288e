//go:build linux && cgo

package cuda

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/accelkit/accelkit/driver"
)

// stream is a CUstream created CU_STREAM_NON_BLOCKING (h != nil), or the
// legacy default stream (h == nil, ID 0). Safe for concurrent use.
//
// Locking: none; dev, h and id are fixed at creation and destroyed is
// atomic. Using a stream concurrently with its Destroy is a programming
// error the backend does not guard (the handle may be gone when the driver
// sees it).
//
// CUDA reports asynchronous failures for the whole context, and those
// poison it: the device then fails every call with ErrDeviceLost, which
// meets the sticky-stream rule by failing every stream.
type stream struct {
	dev       *device
	h         C.CUstream
	id        uint64
	destroyed atomic.Bool
	foreign   bool // the caller's CUstream (ForeignStream): never destroyed here
}

func (s *stream) Device() driver.Device { return s.dev.state.Public }
func (s *stream) ID() uint64            { return s.id }

func (s *stream) check(op string) error {
	if err := s.dev.state.Check(op); err != nil {
		return err
	}
	if s.destroyed.Load() {
		return s.destroyedError(op)
	}
	return nil
}

func (s *stream) destroyedError(op string) error {
	return s.dev.state.DestroyedError(op, "stream "+strconv.FormatUint(s.id, 10))
}

func (s *stream) Query() (bool, error) {
	if err := s.check("Stream.Query"); err != nil {
		return false, err
	}
	r := C.ak_stream_query(s.dev.l, s.dev.ctx, s.h)
	if r == errNotReady {
		return false, nil
	}
	if err := s.dev.result("cuStreamQuery", r); err != nil {
		return false, err
	}
	return true, nil
}

func (s *stream) Synchronize() error {
	if err := s.check("Stream.Synchronize"); err != nil {
		return err
	}
	return s.dev.result("cuStreamSynchronize", C.ak_stream_sync(s.dev.l, s.dev.ctx, s.h))
}

// WaitEvent makes later work on s wait for e, which may belong to another
// device of the same driver (CUDA orders across contexts).
func (s *stream) WaitEvent(e driver.Event) error {
	if err := s.check("Stream.WaitEvent"); err != nil {
		return err
	}
	ev, ok := e.(*event)
	if !ok || ev == nil || ev.dev.drv != s.dev.drv {
		return fmt.Errorf("cuda device %d: WaitEvent on stream %d: event %T is not from this cuda driver: %w", s.dev.ordinal, s.id, e, driver.ErrInvalidValue)
	}
	if err := ev.check("Stream.WaitEvent"); err != nil {
		return err
	}
	return s.dev.result("cuStreamWaitEvent", C.ak_stream_wait(s.dev.l, s.dev.ctx, s.h, ev.h))
}

// Destroy releases the stream; CUDA lets its queued work finish first.
func (s *stream) Destroy() error {
	if s.h == nil {
		return fmt.Errorf("cuda device %d: the default stream cannot be destroyed: %w", s.dev.ordinal, driver.ErrInvalidValue)
	}
	if s.foreign {
		return s.foreignDestroyError()
	}
	if err := s.dev.state.Check("Stream.Destroy"); err != nil {
		return err
	}
	if !s.destroyed.CompareAndSwap(false, true) {
		return fmt.Errorf("cuda device %d: Stream.Destroy: stream %d already destroyed: %w", s.dev.ordinal, s.id, driver.ErrInvalidValue)
	}
	return s.dev.result("cuStreamDestroy_v2", C.ak_stream_destroy(s.dev.l, s.dev.ctx, s.h))
}

// event is a CUevent created CU_EVENT_DISABLE_TIMING. Safe for concurrent
// use.
//
// Locking: none, as for stream, with the same caveat about Destroy.
type event struct {
	dev       *device
	h         C.CUevent
	destroyed atomic.Bool
}

func (e *event) Device() driver.Device { return e.dev.state.Public }

func (e *event) check(op string) error {
	if err := e.dev.state.Check(op); err != nil {
		return err
	}
	if e.destroyed.Load() {
		return e.dev.state.DestroyedError(op, "event")
	}
	return nil
}

// Record marks the work queued on s so far; s must be a stream of the
// event's device (CUDA requires one context for both).
func (e *event) Record(s driver.Stream) error {
	if err := e.check("Event.Record"); err != nil {
		return err
	}
	st, err := e.dev.stream(s, "Event.Record")
	if err != nil {
		return err
	}
	return e.dev.result("cuEventRecord", C.ak_event_record(e.dev.l, e.dev.ctx, e.h, st.h))
}

func (e *event) Query() (bool, error) {
	if err := e.check("Event.Query"); err != nil {
		return false, err
	}
	r := C.ak_event_query(e.dev.l, e.dev.ctx, e.h)
	if r == errNotReady {
		return false, nil
	}
	if err := e.dev.result("cuEventQuery", r); err != nil {
		return false, err
	}
	return true, nil
}

func (e *event) Synchronize() error {
	if err := e.check("Event.Synchronize"); err != nil {
		return err
	}
	return e.dev.result("cuEventSynchronize", C.ak_event_sync(e.dev.l, e.dev.ctx, e.h))
}

func (e *event) Destroy() error {
	if err := e.dev.state.Check("Event.Destroy"); err != nil {
		return err
	}
	if !e.destroyed.CompareAndSwap(false, true) {
		return fmt.Errorf("cuda device %d: Event.Destroy: event already destroyed: %w", e.dev.ordinal, driver.ErrInvalidValue)
	}
	return e.dev.result("cuEventDestroy_v2", C.ak_event_destroy(e.dev.l, e.dev.ctx, e.h))
}
