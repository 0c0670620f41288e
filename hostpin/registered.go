package hostpin

// Registered host memory: a buffer of the caller's, page-locked in place.
//
// Staging costs a CPU copy of every byte into a pinned chunk. A buffer the
// caller fills and copies again and again (an input batch, a KV-cache
// page) can instead be registered once (cuMemHostRegister through the
// driver's HostRegisterDevice capability): from then on the Stager copies
// it with one asynchronous DMA, no chunk and no CPU copy. The driver pins
// the Go memory with a runtime.Pinner while it is registered, so the
// garbage collector neither moves nor frees it; registering costs about
// 1 ms for 16 MiB on an H100 host (cuMemHostRegister, ANCHORS), so it pays
// only for memory that is copied many times.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
)

// Registered is a buffer of the caller's that the Stager's device has
// page-locked in place (Stager.Register). The Stager's copies from or to a
// slice lying inside it are one asynchronous DMA each, with no staging.
//
// A Registered is safe for concurrent use by multiple goroutines. Close
// waits for the Stager copies through the registration that have started,
// and none starts after it.
type Registered struct {
	// Locking: mu guards live. A Stager copy through the registration holds mu
	// shared from its check of live until its DMA is done; Close holds it
	// exclusively, so it waits for those copies and none starts after it.

	st  *Stager
	hr  driver.HostRegisterDevice
	buf *driver.HostBuffer

	mu   sync.RWMutex
	live bool
}

// Register page-locks buf in place for the Stager's device and returns the
// registration; buf stays the caller's, and its contents are not touched.
// Until Close, the Stager's CopyHtoD from and CopyDtoH to any slice of
// buf are one asynchronous DMA each, and buf's memory is pinned where it is
// (the driver holds a runtime.Pinner on it). It fails with an error
// wrapping driver.ErrNotSupported when the device cannot register memory
// (driver.HostRegisterDevice), driver.ErrInvalidValue for an empty buf, and
// driver.ErrAlreadyRegistered when buf overlaps a registration or a pinned
// allocation.
func (s *Stager) Register(buf []byte) (*Registered, error) {
	hr, ok := driver.AsHostRegister(s.dev)
	if !ok {
		return nil, fmt.Errorf("hostpin: Register: device %d (%s) cannot page-lock existing memory (no driver.HostRegisterDevice capability); stage the copies instead: %w",
			s.dev.Ordinal(), s.dev.Name(), driver.ErrNotSupported)
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("hostpin: Register of an empty buffer: want at least one byte: %w", driver.ErrInvalidValue)
	}
	hb, err := hr.HostRegister(buf)
	if err != nil {
		return nil, fmt.Errorf("hostpin: Register %d bytes: %w", len(buf), err)
	}
	r := &Registered{st: s, hr: hr, buf: hb, live: true}
	s.regs.add(r)
	return r, nil
}

// Bytes returns the registered memory: the buffer given to Register.
func (r *Registered) Bytes() []byte { return r.buf.Bytes() }

// HostBuffer returns the driver's buffer for the registration, for async
// copies of your own (driver.Device.CopyHtoD and CopyDtoH accept its
// slices as pinned). Such copies must be complete before Close.
func (r *Registered) HostBuffer() *driver.HostBuffer { return r.buf }

// Close waits for the Stager's copies through the registration, then ends
// it: the memory is ordinary Go memory again, and the Stager stages later
// copies of it. Async copies of your own from HostBuffer must be complete
// first. The registration ends even when the driver reports an error (a
// lost or closed device has ended it already): that error is returned
// once, and Close is idempotent (later calls return nil) and safe to call
// concurrently with the other methods. Bytes and HostBuffer keep
// answering; Registered has no other method that starts work.
func (r *Registered) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.live {
		return nil
	}
	r.live = false
	r.st.regs.remove(r)
	if err := r.hr.HostUnregister(r.buf); err != nil {
		return fmt.Errorf("hostpin: Close of a registration of %d bytes: %w", r.buf.Len(), err)
	}
	return nil
}

// span is the address range of a slice.
func span(b []byte) (lo, hi uintptr) {
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return lo, lo + uintptr(len(b))
}

// byStart orders registrations by their first address, for binary search.
func byStart(x *Registered, lo uintptr) int {
	xlo, _ := span(x.Bytes())
	return cmp.Compare(xlo, lo)
}

// registry is a Stager's live registrations, sorted by address (they are
// disjoint: the driver refuses overlaps). Locking: mu guards regs.
type registry struct {
	mu   sync.RWMutex
	regs []*Registered
}

func (g *registry) add(r *Registered) {
	lo, _ := span(r.Bytes())
	g.mu.Lock()
	defer g.mu.Unlock()
	i, _ := slices.BinarySearchFunc(g.regs, lo, byStart)
	g.regs = slices.Insert(g.regs, i, r)
}

func (g *registry) remove(r *Registered) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.regs, r); i >= 0 {
		g.regs = slices.Delete(g.regs, i, i+1)
	}
}

// find returns the registration holding all of b, or nil (also for an
// empty b).
func (g *registry) find(b []byte) *Registered {
	if len(b) == 0 {
		return nil
	}
	lo, hi := span(b)
	g.mu.RLock()
	defer g.mu.RUnlock()
	// The last registration starting at or before lo is the only one that
	// can hold it.
	i, found := slices.BinarySearchFunc(g.regs, lo, byStart)
	if !found {
		i--
	}
	if i < 0 {
		return nil
	}
	r := g.regs[i]
	if rlo, rhi := span(r.Bytes()); lo >= rlo && hi <= rhi {
		return r
	}
	return nil
}

// viaRegistered runs a copy whose host side lies inside a live
// registration: issue queues one async DMA on st, then it waits for that
// DMA (an event; the stream if no event can be had), so the Stager's
// promises hold as for a staged copy (CopyHtoD returns once src may be
// reused, CopyDtoH once dst is filled). ok is false when the registration
// ended before the copy could hold it: the caller stages instead.
func (s *Stager) viaRegistered(r *Registered, st driver.Stream, what string, issue func() error) (ok bool, err error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.live {
		return false, nil
	}
	if err := issue(); err != nil {
		return true, fmt.Errorf("hostpin: %s from registered memory: %w", what, err)
	}
	if err := s.waitIssued(st); err != nil {
		return true, fmt.Errorf("hostpin: %s from registered memory: waiting for the DMA: %w", what, err)
	}
	return true, nil
}

// waitIssued waits for the work queued on st so far: on an event recorded
// there, so work queued after it by others is not waited for, or on the
// whole stream when no event can be had.
func (s *Stager) waitIssued(st driver.Stream) error {
	ev, err := s.dev.NewEvent()
	if err != nil {
		return st.Synchronize()
	}
	if err := ev.Record(st); err != nil {
		return errors.Join(st.Synchronize(), ev.Destroy())
	}
	return errors.Join(ev.Synchronize(), ev.Destroy())
}
