package hostpin

// core: what the caching Allocator and the uncached Direct share. Both hand
// out Buffers of one device's pinned memory and free them in stream order;
// core holds the device, the lock, the counters (Stats), the event pool and
// evpool.Deferred of the frees, closing, and the driver calls, timed and
// counted. The stream-ordered free itself is free.go; what happens to a
// block nobody uses any more is each type's own: the Allocator caches it
// (cache.go), Direct hands it back to the driver (direct.go).
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

// Stats are an allocator's counters since it was made. Sizes are handed-out
// sizes (class or page rounded), not requested lengths. A Direct counts the
// same way; it caches nothing, so its Hits, BytesCached and Evictions stay 0.
type Stats struct {
	Requests uint64 // Alloc calls that returned a buffer, size 0 included
	Hits     uint64 // served from the cache
	Misses   uint64 // needed a driver allocation (of a slab or a buffer; every non-empty Direct Alloc)

	BytesInUse    int64 // handed out and not freed
	BytesPending  int64 // freed, waiting for recorded streams
	BytesCached   int64 // idle, ready for reuse
	BytesReserved int64 // held from the driver (slabs count whole)
	PeakInUse     int64 // highest BytesInUse
	PeakReserved  int64 // highest BytesReserved

	DriverAllocs    uint64        // HostAlloc calls that succeeded
	DriverFrees     uint64        // HostFree calls
	DriverAllocTime time.Duration // total time in HostAlloc
	DriverAllocMax  time.Duration // longest HostAlloc
	DriverFreeTime  time.Duration // total time in HostFree
	DriverFreeMax   time.Duration // longest HostFree
	Evictions       uint64        // units (buffers or slabs) freed by the cap
}

// unit is a driver allocation on its way back to the driver.
type unit = *driver.HostBuffer

// core is the state Allocator and Direct share; each embeds one.
//
// Locking: mu guards closed, stats, the state of every block, Buffer.freed
// and Buffer.streams, and the fields the embedding type names as its own
// (the Allocator's free lists and age list). It is never held across a
// driver call or a call into evpool, and no other lock is taken under it;
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

// undoRequest takes back the Requests and Misses counts of a failed Alloc.
func (c *core) undoRequest() {
	c.mu.Lock()
	c.stats.Requests--
	c.stats.Misses--
	c.mu.Unlock()
}

// useLocked marks a block in use and counts it.
func (c *core) useLocked(blk *block) {
	blk.state = stateInUse
	c.stats.BytesInUse += int64(len(blk.mem))
	c.stats.PeakInUse = max(c.stats.PeakInUse, c.stats.BytesInUse)
}

// hostAlloc calls the driver, timing the call. On out of memory it calls
// reclaim (nil for none), which returns idle memory to the driver and says
// how many units went, and when some did, tries once more.
func (c *core) hostAlloc(size int, reclaim func() (int, error)) (*driver.HostBuffer, error) {
	hb, err := c.timedHostAlloc(size)
	if errors.Is(err, driver.ErrOutOfMemory) && reclaim != nil {
		if n, _ := reclaim(); n > 0 {
			hb, err = c.timedHostAlloc(size)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("hostpin: pinned allocation of %d bytes: %w", size, err)
	}
	return hb, nil
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
	c.mu.Lock()
	c.stats.DriverAllocs++
	c.stats.DriverAllocTime += d
	c.stats.DriverAllocMax = max(c.stats.DriverAllocMax, d)
	c.stats.BytesReserved += int64(hb.Len())
	c.stats.PeakReserved = max(c.stats.PeakReserved, c.stats.BytesReserved)
	c.mu.Unlock()
	return hb, nil
}

func bufLen(hb *driver.HostBuffer) int {
	if hb == nil {
		return 0
	}
	return hb.Len()
}

// hostFree returns hb to the driver, timing the call.
func (c *core) hostFree(hb *driver.HostBuffer) error {
	n := hb.Len()
	t0 := time.Now()
	err := c.dev.HostFree(hb)
	d := time.Since(t0)
	c.mu.Lock()
	c.stats.DriverFrees++
	c.stats.DriverFreeTime += d
	c.stats.DriverFreeMax = max(c.stats.DriverFreeMax, d)
	c.stats.BytesReserved -= int64(n)
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

// snapshot returns a copy of the counters.
func (c *core) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
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
