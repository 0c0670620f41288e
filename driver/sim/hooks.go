package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/driver"
)

// ErrInjected is wrapped by every failure that a test hook caused, beside the
// driver sentinel the failure maps to.
var ErrInjected = errors.New("sim: injected fault")

// Stats are a device's counters since the driver opened.
type Stats struct {
	Mallocs, Frees        uint64
	HostAllocs, HostFrees uint64
	// Successful HostRegister and HostUnregister calls.
	HostRegisters, HostUnregisters uint64
	BytesAllocated                 int64 // device bytes charged now (Malloc and MemCreate, page-rounded)
	StreamsCreated                 uint64
	EventsCreated                  uint64
	EventRecords                   uint64
	EventQueries                   uint64
	Copies                         uint64 // async and sync copies accepted
	// Successful VMM calls: allocators are judged by how few they make
	// (SetAccess is the dear one on CUDA).
	MemCreates, MemMaps, SetAccesses, MemUnmaps uint64
}

// counters backs Stats.
//
// Locking: none; every field is atomic, and Stats reads each on its own
// (a snapshot is not atomic as a whole).
type counters struct {
	mallocs, frees, hostAllocs, hostFrees atomic.Uint64
	hostRegisters, hostUnregisters        atomic.Uint64
	bytesAllocated                        atomic.Int64
	streamsCreated, eventsCreated         atomic.Uint64
	eventRecords, eventQueries, copies    atomic.Uint64
	memCreates, memMaps, setAccesses      atomic.Uint64
	memUnmaps                             atomic.Uint64
}

// Stats returns the device's counters.
func (d *Device) Stats() Stats {
	c := &d.stats
	return Stats{
		Mallocs:         c.mallocs.Load(),
		Frees:           c.frees.Load(),
		HostAllocs:      c.hostAllocs.Load(),
		HostFrees:       c.hostFrees.Load(),
		HostRegisters:   c.hostRegisters.Load(),
		HostUnregisters: c.hostUnregisters.Load(),
		BytesAllocated:  c.bytesAllocated.Load(),
		StreamsCreated:  c.streamsCreated.Load(),
		EventsCreated:   c.eventsCreated.Load(),
		EventRecords:    c.eventRecords.Load(),
		EventQueries:    c.eventQueries.Load(),
		Copies:          c.copies.Load(),
		MemCreates:      c.memCreates.Load(),
		MemMaps:         c.memMaps.Load(),
		SetAccesses:     c.setAccesses.Load(),
		MemUnmaps:       c.memUnmaps.Load(),
	}
}

// Gate queues a gate on s: work queued on s after it runs only once open is
// called. open is idempotent and safe to call from any goroutine; closing the
// driver or losing the device also opens it.
func (d *Device) Gate(s driver.Stream) (open func(), err error) {
	st, err := d.stream(s, "Gate")
	if err != nil {
		return nil, err
	}
	ch := make(chan struct{})
	abort := d.abortCh()
	err = st.enqueue("Gate", func() error {
		select {
		case <-ch:
		case <-abort:
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sync.OnceFunc(func() { close(ch) }), nil
}

// abortCh returns a channel closed when the device is closed or lost.
func (d *Device) abortCh() <-chan struct{} { return d.abortC }

// FailNthMalloc makes the n-th Malloc from now fail (1 is the next) with an
// error wrapping driver.ErrOutOfMemory and ErrInjected; n <= 0 cancels it.
func (d *Device) FailNthMalloc(n int) {
	d.mu.Lock()
	d.failNth = max(n, 0)
	d.faultOn.Store(d.failNth > 0 || d.faultRNG != nil)
	d.mu.Unlock()
}

// SetFaultRate makes every fallible call (Malloc, HostAlloc, HostRegister,
// NewStream, NewEvent, Event.Record, the copies including CopyPeer,
// Memset, and the VMM calls AddressReserve, MemCreate, MemMap and
// SetAccess) fail with probability p, drawn from an RNG seeded with seed so
// a failing run repeats. Calls that release (Free, HostFree,
// HostUnregister, Destroy, MemUnmap, MemRelease, AddressFree) never fail by
// injection, so cleanup always works. Allocation failures wrap driver.ErrOutOfMemory, others
// driver.ErrInvalidValue; all wrap ErrInjected. p <= 0 turns it off.
func (d *Device) SetFaultRate(seed int64, p float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p <= 0 {
		d.faultP, d.faultRNG = 0, nil
	} else {
		d.faultP = min(p, 1)
		d.faultRNG = rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	}
	d.faultOn.Store(d.failNth > 0 || d.faultRNG != nil)
}

// FailStream makes the next work item queued on s (a copy, Memset,
// WaitEvent, Gate or Event.Record) fail when it runs: s's error becomes
// sticky (Query and Synchronize return an error wrapping
// driver.ErrInvalidValue and ErrInjected), events recorded on s from then on
// report it, and later work on s is refused.
func (d *Device) FailStream(s driver.Stream) {
	st, err := d.stream(s, "FailStream")
	if err != nil {
		return
	}
	st.mu.Lock()
	st.failNext = true
	st.mu.Unlock()
}

// LoseDevice makes every later call on the device, its streams and events
// fail with driver.ErrDeviceLost, as after a GPU falls off the bus. Queued
// work is dropped and gates open. Closing the driver still frees the memory.
func (d *Device) LoseDevice() { d.lose(fmt.Errorf("%w (LoseDevice)", driver.ErrDeviceLost)) }

// mallocFault applies FailNthMalloc and SetFaultRate to a Malloc.
func (d *Device) mallocFault(size uint64) error {
	if !d.faultOn.Load() {
		return nil
	}
	d.mu.Lock()
	nth := false
	if d.failNth > 0 {
		d.failNth--
		nth = d.failNth == 0
	}
	d.faultOn.Store(d.failNth > 0 || d.faultRNG != nil)
	d.mu.Unlock()
	if nth {
		return fmt.Errorf("sim device %d: Malloc of %d bytes failed (FailNthMalloc): %w (%w)",
			d.ordinal, size, ErrInjected, driver.ErrOutOfMemory)
	}
	return d.fault("Malloc", true)
}

// fault draws from the SetFaultRate RNG for op.
func (d *Device) fault(op string, alloc bool) error {
	if !d.faultOn.Load() {
		return nil
	}
	d.mu.Lock()
	hit := d.faultRNG != nil && d.faultRNG.Float64() < d.faultP
	d.mu.Unlock()
	if !hit {
		return nil
	}
	sentinel := driver.ErrInvalidValue
	if alloc {
		sentinel = driver.ErrOutOfMemory
	}
	return fmt.Errorf("sim device %d: %s failed (SetFaultRate): %w (%w)", d.ordinal, op, ErrInjected, sentinel)
}
