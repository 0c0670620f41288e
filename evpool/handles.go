package evpool

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/driver"
)

// Handles keeps one costly library handle (a BLAS or DNN context, a
// workspace) per (device ordinal, stream ID): Get makes it on first use with
// the create function and returns the same handle afterwards; Close destroys
// every handle made.
//
// Handles is safe for concurrent use. Concurrent first uses of one stream
// call create once; the others wait for that call and share its result. A
// create error is returned to the callers that waited for it and is not
// kept: the next Get tries again. Using a handle after Close destroyed it
// is the caller's race to avoid; Get after Close fails with an error
// wrapping ErrClosed.
type Handles[H any] struct {
	// Locking: the hit path is a sync.Map load, an atomic load of the slot's
	// ready flag and one of closed: no lock, so streams never contend on a hit.
	// mu guards inserting a new slot against Close (so Close's sweep sees every
	// slot); it is never held across create or destroy. A slot's fields are
	// written once by its creator before ready is set and done closed, and read
	// only after.

	create  func(driver.Stream) (H, error)
	destroy func(H) error

	slots  sync.Map // streamKey -> *slot[H]
	closed atomic.Bool

	mu sync.Mutex // guards inserting slots vs. Close
}

// slot is one stream's handle, or the creation in flight.
type slot[H any] struct {
	ready atomic.Bool   // h and err are set
	done  chan struct{} // closed with ready, for waiters
	h     H
	err   error
}

// NewHandles makes an empty set of handles. create makes the handle of a
// stream on first use; destroy releases one at Close (nil means nothing to
// release). create must not call Get for its own stream: that Get would
// wait for the create that made the call.
func NewHandles[H any](create func(s driver.Stream) (H, error), destroy func(H) error) *Handles[H] {
	return &Handles[H]{create: create, destroy: destroy}
}

// Get returns the handle of stream s, making it on first use.
func (hs *Handles[H]) Get(s driver.Stream) (H, error) {
	var zero H
	if s == nil {
		return zero, fmt.Errorf("evpool: handle for a nil stream: Handles serves the streams of every device, so nil names none; pass dev.DefaultStream(): %w", driver.ErrInvalidValue)
	}
	k, ok := keyOf(s)
	if !ok {
		return zero, fmt.Errorf("evpool: handle for stream %d, which has no device: %w", s.ID(), driver.ErrInvalidValue)
	}
	if v, ok := hs.slots.Load(k); ok && !hs.closed.Load() {
		sl := v.(*slot[H])
		if sl.ready.Load() && sl.err == nil {
			return sl.h, nil
		}
	}
	return hs.slow(k, s)
}

func (hs *Handles[H]) errClosed() error {
	return fmt.Errorf("evpool: get handle: %w", ErrClosed)
}

// slow waits for a creation in flight or starts one.
func (hs *Handles[H]) slow(k streamKey, s driver.Stream) (H, error) {
	var zero H
	hs.mu.Lock()
	if hs.closed.Load() {
		hs.mu.Unlock()
		return zero, hs.errClosed()
	}
	if hs.create == nil {
		hs.mu.Unlock()
		return zero, fmt.Errorf("evpool: handles made without a create function: %w", driver.ErrInvalidValue)
	}
	v, loaded := hs.slots.LoadOrStore(k, &slot[H]{done: make(chan struct{})})
	hs.mu.Unlock()
	sl := v.(*slot[H])
	if !loaded {
		return hs.make(k, sl, s)
	}
	<-sl.done
	switch {
	case sl.err != nil:
		// The creator has removed its failed slot: the callers that waited
		// for it share the error, and the next Get tries again.
		return zero, sl.err
	case hs.closed.Load():
		return zero, hs.errClosed()
	}
	return sl.h, nil
}

// make runs create for the slot this caller inserted.
func (hs *Handles[H]) make(k streamKey, sl *slot[H], s driver.Stream) (h H, err error) {
	finished := false
	defer func() {
		if !finished {
			// create panicked: let the waiters go with an error and
			// leave the key free for a retry; the panic goes on.
			sl.err = fmt.Errorf("evpool: create handle for stream %d of device %d panicked", k.id, k.ordinal)
			hs.slots.CompareAndDelete(k, sl)
			sl.ready.Store(true)
			close(sl.done)
		}
	}()
	h, err = hs.create(s)
	finished = true
	if err != nil {
		sl.err = fmt.Errorf("evpool: create handle for stream %d of device %d: %w", k.id, k.ordinal, err)
		hs.slots.CompareAndDelete(k, sl)
		sl.ready.Store(true)
		close(sl.done)
		var zero H
		return zero, sl.err
	}
	sl.h = h
	sl.ready.Store(true)
	close(sl.done)
	if hs.closed.Load() {
		// Close began while create ran; its sweep waits for done and
		// destroys the handle.
		var zero H
		return zero, hs.errClosed()
	}
	return h, nil
}

// Close destroys every handle made, once, and makes later Gets fail with an
// error wrapping ErrClosed. It waits for creations in flight and
// destroys their handles too. It returns the destroy failures, joined; a
// second Close returns nil.
func (hs *Handles[H]) Close() error {
	hs.mu.Lock()
	already := hs.closed.Swap(true)
	hs.mu.Unlock()
	if already {
		return nil
	}
	// No slot is inserted after closed is set under mu, so this sweep sees
	// them all, and it is the only code that destroys: each handle once.
	var errs []error
	hs.slots.Range(func(key, v any) bool {
		sl := v.(*slot[H])
		<-sl.done
		hs.slots.Delete(key)
		if sl.err != nil || hs.destroy == nil {
			return true
		}
		if err := hs.destroy(sl.h); err != nil {
			k := key.(streamKey)
			errs = append(errs, fmt.Errorf("stream %d of device %d: %w", k.id, k.ordinal, err))
		}
		return true
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("evpool: close handles: %w", err)
	}
	return nil
}
