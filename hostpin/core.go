package hostpin

// core: what the caching Allocator and the uncached Direct share. Both hand
// out Buffers of one device's pinned memory and free them in stream order;
// core holds the device, the lock, the counters (Stats, stats.go), the
// event pool and evpool.Deferred of the frees, closing, and the driver
// calls, timed and counted, with the out-of-memory retry. The
// stream-ordered free itself is free.go; what happens to a block nobody
// uses any more is each type's own: the Allocator caches it (cache.go),
// Direct hands it back to the driver (direct.go).
//
// Driver calls (HostAlloc, HostFree, event records, host waits) are made
// outside mu: they take milliseconds, and other callers must keep hitting
// the cache meanwhile.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

// unit is a driver allocation on its way back to the driver.
type unit = *driver.HostBuffer

// core is the state Allocator and Direct share; each embeds one.
//
// Locking: mu guards closed, stats and the fields after it, the state of
// every block, Buffer.freed and Buffer.streams, and the fields the
// embedding type names as its own (the Allocator's free lists and age
// list). It is never held across a driver call or a call into evpool, and
// no other lock is taken under it;
// Deferred callbacks (run by Poll or Drain outside Deferred's lock) take mu
// themselves. dev, maxSize, events, deferred and idleLocked are set by the
// constructor and never change.
type core struct {
	dev      driver.Device
	maxSize  int
	events   *evpool.Pool     // the frees' events, and the Stager's chunk events
	deferred *evpool.Deferred // stream-ordered frees waiting for their streams
	// idleLocked takes a block nobody uses any more (its buffer freed, its
	// streams' work over): the Allocator caches it, Direct hands it back. It
	// returns the driver allocations to free once mu is released.
	idleLocked func(*block) []unit

	mu     sync.Mutex
	closed bool
	stats  Stats
	// What the derived stats need (stats.go): fresh blocks handed out since
	// ResetAccumulatedStats, the active buffers and bytes at that reset, and
	// the number of resets, so a failed miss takes back only counts of its
	// own epoch.
	fresh           uint64
	activeBase      int64
	activeBytesBase int64
	epoch           uint64
}

// init sets up c for dev; idleLocked is the embedding type's way back for a
// block (see core.idleLocked).
func (c *core) init(dev driver.Device, maxSize int, idleLocked func(*block) []unit) error {
	if dev == nil {
		return fmt.Errorf("hostpin: nil device: %w", driver.ErrInvalidValue)
	}
	c.dev = dev
	c.maxSize = maxSize
	c.events = evpool.NewPool(dev, evpool.PoolOptions{})
	c.deferred = evpool.NewDeferred(c.events)
	c.idleLocked = idleLocked
	return nil
}

// lockForAlloc starts an Alloc of size bytes: it checks the size, makes the
// frees whose streams completed reusable, locks mu and counts the request.
// For size > 0 it returns (nil, nil) with mu held, the request counted; the
// caller counts the hit or miss and unlocks. Otherwise mu is released and it
// returns the empty buffer of size 0 or the error.
func (c *core) lockForAlloc(size int) (*Buffer, error) {
	if size < 0 || size > c.maxSize {
		return nil, fmt.Errorf("%w %d: want 0..%d bytes: %w", ErrInvalidSize, size, c.maxSize, driver.ErrInvalidValue)
	}
	if c.deferred.Pending() > 0 {
		c.deferred.Poll()
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.stats.Requests++
	if size == 0 {
		c.mu.Unlock()
		return &Buffer{c: c}, nil
	}
	return nil, nil
}

// undoRequest takes back the Requests and Misses counts of a failed Alloc,
// counted in epoch; counts zeroed by ResetAccumulatedStats since then have
// nothing of it to take back.
func (c *core) undoRequest(epoch uint64) {
	c.mu.Lock()
	if c.epoch == epoch {
		c.stats.Requests--
		c.stats.Misses--
	}
	c.mu.Unlock()
}

// useLocked marks a block in use and counts it: the whole of the hit
// path's accounting beside its Hits.
func (c *core) useLocked(blk *block) {
	blk.state = stateInUse
	c.stats.BytesInUse += int64(len(blk.mem))
	c.stats.PeakInUse = max(c.stats.PeakInUse, c.stats.BytesInUse)
}

// useFreshLocked marks a block just taken from the driver in use and counts
// it as handed out (a miss that got its memory).
func (c *core) useFreshLocked(blk *block) {
	c.useLocked(blk)
	c.fresh++
}

// hostAlloc calls the driver for size bytes, timing the call. On out of
// memory it calls reclaim (nil where nothing is cached: Direct), which
// returns the idle cache to the driver and says how many driver allocations
// went; when some did, it tries once more, and only once. An out of memory
// that stands is returned explained (oomError). A driver free that fails
// during a reclaim whose retry succeeds is not reported: the units are out
// of the cache and counted either way, and failing the Alloc would lose
// the memory just got.
func (c *core) hostAlloc(size int, reclaim func() (int, error)) (*driver.HostBuffer, error) {
	hb, err := c.timedHostAlloc(size)
	if err == nil {
		return hb, nil
	}
	if !errors.Is(err, driver.ErrOutOfMemory) {
		return nil, fmt.Errorf("hostpin: pinned allocation of %d bytes: %w", size, err)
	}
	released := -1 // nothing cached to release
	if reclaim != nil {
		var relErr error
		released, relErr = reclaim()
		if released > 0 {
			c.mu.Lock()
			c.stats.AllocRetries++
			c.mu.Unlock()
			if hb, err = c.timedHostAlloc(size); err == nil {
				return hb, nil
			}
		}
		if relErr != nil {
			err = errors.Join(err, relErr)
		}
		if !errors.Is(err, driver.ErrOutOfMemory) { // the retry failed otherwise
			return nil, fmt.Errorf("hostpin: pinned allocation of %d bytes, retried after releasing the idle cache: %w", size, err)
		}
	}
	return nil, c.oomError(size, released, err)
}

// oomError counts an Alloc that ran out of pinned memory and explains it:
// what this allocator holds, what was released (released units; -1 for an
// allocator that caches nothing), and what the caller can do. It wraps err,
// which matches driver.ErrOutOfMemory.
func (c *core) oomError(size, released int, err error) error {
	c.mu.Lock()
	c.stats.OOMs++
	s := c.stats
	c.mu.Unlock()
	var tried string
	switch {
	case released < 0:
		tried = "it caches nothing to release"
	case released == 0:
		tried = "nothing idle could be released, so it was not retried"
	default:
		tried = fmt.Sprintf("its %d idle driver allocations were released and the allocation retried once", released)
	}
	return fmt.Errorf("hostpin: out of pinned memory for %d bytes: this allocator holds %d bytes from the driver (%d in use, %d freed and waiting for their streams, %d idle) and %s; "+
		"free the buffers you no longer need, let the streams recorded on freed ones finish (then Poll), "+
		"or return pinned memory held elsewhere (EmptyCache, or a lower Options.CacheCap, on other Allocators): %w",
		size, s.BytesReserved, s.BytesInUse, s.BytesPending, s.BytesCached, tried, err)
}

func (c *core) timedHostAlloc(size int) (*driver.HostBuffer, error) {
	t0 := time.Now()
	hb, err := c.dev.HostAlloc(size)
	d := time.Since(t0)
	if err != nil {
		return nil, err
	}
	if hb == nil || hb.Len() < size {
		return nil, fmt.Errorf("driver returned a %d-byte buffer for %d bytes: %w", bufLen(hb), size, driver.ErrInvalidValue)
	}
	n := int64(hb.Len())
	c.mu.Lock()
	s := &c.stats
	s.DriverAllocs++
	s.DriverAllocBytes += n
	s.DriverAllocTime += d
	s.DriverAllocMax = max(s.DriverAllocMax, d)
	if s.DriverAllocMin == 0 || d < s.DriverAllocMin {
		s.DriverAllocMin = d
	}
	s.BytesReserved += n
	s.PeakReserved = max(s.PeakReserved, s.BytesReserved)
	s.UnitsReserved++
	s.PeakUnitsReserved = max(s.PeakUnitsReserved, s.UnitsReserved)
	c.mu.Unlock()
	return hb, nil
}

func bufLen(hb *driver.HostBuffer) int {
	if hb == nil {
		return 0
	}
	return hb.Len()
}

// hostFree returns hb to the driver, timing the call. It is counted, and hb
// leaves BytesReserved, even when the driver fails: the allocator holds it
// no more either way.
func (c *core) hostFree(hb *driver.HostBuffer) error {
	n := hb.Len()
	t0 := time.Now()
	err := c.dev.HostFree(hb)
	d := time.Since(t0)
	c.mu.Lock()
	s := &c.stats
	s.DriverFrees++
	s.DriverFreeBytes += int64(n)
	s.DriverFreeTime += d
	s.DriverFreeMax = max(s.DriverFreeMax, d)
	if s.DriverFreeMin == 0 || d < s.DriverFreeMin {
		s.DriverFreeMin = d
	}
	s.BytesReserved -= int64(n)
	s.UnitsReserved--
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("hostpin: pinned free of %d bytes: %w", n, err)
	}
	return nil
}

// freeUnits returns units to the driver, all of them even when some fail,
// and returns the failures joined.
func (c *core) freeUnits(units []unit) error {
	var errs []error
	for _, u := range units {
		if err := c.hostFree(u); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close marks c closed, so Alloc refuses and blocks freed from then on go
// straight back to the driver; then it runs every deferred free (waiting for
// its streams) and closes the event pool. It reports false, doing nothing,
// when c was closed already; a concurrent second call returns at once.
func (c *core) close() (first bool, err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false, nil
	}
	c.closed = true
	c.mu.Unlock()
	// Drain also reports the sticky errors of failed streams; those belong
	// to the streams' owners, and the blocks waiting on them are released
	// either way, so they are not the allocator's to return.
	_ = c.deferred.Drain()
	return true, c.events.Close()
}
