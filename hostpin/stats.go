package hostpin

// Stats: the counters of an Allocator or a Direct, their two resets, and
// Map, which names them as PyTorch's torch.cuda.host_memory_stats() does.
//
// The hit path (a cached Alloc) counts its request and its hit and moves
// its bytes to BytesInUse, as before these stats existed, and nothing
// more. What PyTorch calls the active requests (buffers in use or waiting
// for their streams) is derived instead (activeLocked), and their peaks are
// taken where they fall, at a buffer's return (returnLocked), rather than
// where they rise: between two returns they only grow, so the maxima are
// the same.

import (
	"time"
)

// Stats are an allocator's counters. Sizes are handed-out sizes (class or
// page rounded), not requested lengths. A Direct counts the same way; it
// caches nothing, so its Hits, BytesCached, Evictions and AllocRetries stay
// 0.
//
// Three kinds of field: current values; peaks, which ResetPeakStats sets
// to the current values (and the longest and shortest driver call times,
// which it sets to 0); and cumulative counts and times, which
// ResetAccumulatedStats sets to 0. Without a reset each counts from the
// allocator's creation. Map names them as PyTorch does.
type Stats struct {
	// Cumulative: Alloc calls that returned a buffer (size 0 included),
	// those served from the cache, and those that needed a driver
	// allocation (of a slab or a buffer; every non-empty Direct Alloc).
	Requests uint64
	Hits     uint64
	Misses   uint64

	// Current bytes.
	BytesInUse    int64 // handed out and not freed
	BytesPending  int64 // freed, waiting for recorded streams
	BytesCached   int64 // idle, ready for reuse
	BytesReserved int64 // held from the driver (slabs count whole)
	// Current: non-empty buffers handed out and not yet reusable (in use,
	// or freed and waiting for their streams), and the driver allocations
	// held (a standalone buffer, or a slab of small ones, each counted
	// once).
	ActiveBuffers int64
	UnitsReserved int64

	// Peaks.
	PeakInUse         int64 // highest BytesInUse
	PeakReserved      int64 // highest BytesReserved
	PeakActiveBuffers int64 // highest ActiveBuffers
	PeakActiveBytes   int64 // highest BytesInUse+BytesPending
	PeakUnitsReserved int64 // highest UnitsReserved

	// Cumulative: non-empty buffers handed out (Hits, and the misses that
	// got their memory) and their bytes; buffers that stopped being active
	// (reusable again; for a Direct, or after Close, back to the driver)
	// and their bytes.
	BuffersHandedOut uint64
	BytesHandedOut   int64
	BuffersReturned  uint64
	BytesReturned    int64

	// Cumulative: driver calls that succeeded (HostAlloc) or were made
	// (HostFree), their bytes, and the time in them.
	DriverAllocs     uint64
	DriverFrees      uint64
	DriverAllocBytes int64
	DriverFreeBytes  int64
	DriverAllocTime  time.Duration
	DriverFreeTime   time.Duration
	// Longest and shortest single calls: 0 until the first call after
	// creation or ResetPeakStats.
	DriverAllocMax time.Duration
	DriverAllocMin time.Duration
	DriverFreeMax  time.Duration
	DriverFreeMin  time.Duration

	// Cumulative: units (buffers or slabs) freed by the cap; HostAllocs
	// that ran out of memory, released the idle cache and were tried once
	// more; Allocs that failed with out of memory in the end.
	Evictions    uint64
	AllocRetries uint64
	OOMs         uint64
}

// activeLocked is the number of buffers handed out and not yet returned,
// derived so that the hit path counts only its hit: Hits and fresh count
// the handouts, BuffersReturned the returns, and activeBase what was
// active when ResetAccumulatedStats zeroed them. c.mu held.
func (c *core) activeLocked() int64 {
	return c.activeBase + int64(c.stats.Hits) + int64(c.fresh) - int64(c.stats.BuffersReturned)
}

// returnLocked counts the end of blk's active life (its buffer freed, its
// streams' work over; its bytes already taken off BytesInUse or
// BytesPending), taking the active peaks just before they fall, and hands
// blk to idleLocked. c.mu held.
func (c *core) returnLocked(blk *block) []unit {
	n := int64(len(blk.mem))
	s := &c.stats
	s.PeakActiveBuffers = max(s.PeakActiveBuffers, c.activeLocked())
	s.PeakActiveBytes = max(s.PeakActiveBytes, s.BytesInUse+s.BytesPending+n)
	s.BuffersReturned++
	s.BytesReturned += n
	return c.idleLocked(blk)
}

// snapshot returns a copy of the counters, the derived ones filled in.
func (c *core) snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.ActiveBuffers = c.activeLocked()
	s.PeakActiveBuffers = max(s.PeakActiveBuffers, s.ActiveBuffers)
	active := s.BytesInUse + s.BytesPending
	s.PeakActiveBytes = max(s.PeakActiveBytes, active)
	s.BuffersHandedOut = s.Hits + c.fresh
	s.BytesHandedOut = active - c.activeBytesBase + s.BytesReturned
	return s
}

// resetPeaks sets every peak to its current value and the longest and
// shortest driver call times to 0, as PyTorch's reset_peak_host_memory_stats
// does.
func (c *core) resetPeaks() {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.stats
	s.PeakInUse = s.BytesInUse
	s.PeakReserved = s.BytesReserved
	s.PeakActiveBuffers = c.activeLocked()
	s.PeakActiveBytes = s.BytesInUse + s.BytesPending
	s.PeakUnitsReserved = s.UnitsReserved
	s.DriverAllocMax, s.DriverAllocMin = 0, 0
	s.DriverFreeMax, s.DriverFreeMin = 0, 0
}

// resetAccumulated sets every cumulative count and time to 0, as PyTorch's
// reset_accumulated_host_memory_stats does; current values and peaks stay.
// It starts a new epoch, so that a miss counted before it and failing after
// it takes nothing back from the new counts (undoRequest).
func (c *core) resetAccumulated() {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.stats
	c.activeBase = c.activeLocked()
	c.activeBytesBase = s.BytesInUse + s.BytesPending
	c.fresh = 0
	c.epoch++
	s.Requests, s.Hits, s.Misses = 0, 0, 0
	s.BuffersReturned, s.BytesReturned = 0, 0
	s.DriverAllocs, s.DriverFrees = 0, 0
	s.DriverAllocBytes, s.DriverFreeBytes = 0, 0
	s.DriverAllocTime, s.DriverFreeTime = 0, 0
	s.Evictions, s.AllocRetries, s.OOMs = 0, 0, 0
}

// Map flattens s under the key names of PyTorch's
// torch.cuda.host_memory_stats(), where a field of s has the meaning of
// the key: "allocations.{current,peak,allocated,freed}" (driver
// allocations held), "allocated_bytes.*" (their bytes),
// "active_requests.*" (buffers in use or waiting for their streams),
// "active_bytes.*" (their bytes), "num_host_alloc", "num_host_free", and
// "host_alloc_time.{total,max,min,count,avg}" and "host_free_time.*" in
// microseconds. The README's table gives the field behind each key and
// where the meanings differ. Fields PyTorch has no name for (Requests,
// Hits, Misses, BytesCached, Evictions, AllocRetries, OOMs, ...) are not
// in the map.
func (s Stats) Map() map[string]int64 {
	m := make(map[string]int64, 28)
	stat := func(name string, current, peak, allocated, freed int64) {
		m[name+".current"] = current
		m[name+".peak"] = peak
		m[name+".allocated"] = allocated
		m[name+".freed"] = freed
	}
	stat("allocations", s.UnitsReserved, s.PeakUnitsReserved, int64(s.DriverAllocs), int64(s.DriverFrees))
	stat("allocated_bytes", s.BytesReserved, s.PeakReserved, s.DriverAllocBytes, s.DriverFreeBytes)
	stat("active_requests", s.ActiveBuffers, s.PeakActiveBuffers, int64(s.BuffersHandedOut), int64(s.BuffersReturned))
	stat("active_bytes", s.BytesInUse+s.BytesPending, s.PeakActiveBytes, s.BytesHandedOut, s.BytesReturned)
	m["num_host_alloc"] = int64(s.DriverAllocs)
	m["num_host_free"] = int64(s.DriverFrees)
	duration := func(name string, total, longest, shortest time.Duration, count uint64) {
		m[name+".total"] = total.Microseconds()
		m[name+".max"] = longest.Microseconds()
		m[name+".min"] = shortest.Microseconds()
		m[name+".count"] = int64(count)
		m[name+".avg"] = 0
		if count > 0 {
			m[name+".avg"] = total.Microseconds() / int64(count)
		}
	}
	duration("host_alloc_time", s.DriverAllocTime, s.DriverAllocMax, s.DriverAllocMin, s.DriverAllocs)
	duration("host_free_time", s.DriverFreeTime, s.DriverFreeMax, s.DriverFreeMin, s.DriverFrees)
	return m
}
