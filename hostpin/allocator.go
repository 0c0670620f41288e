package hostpin

// Allocator: the caching allocator of pinned host memory, and its public
// surface.
//
// Page-locked host memory is what makes a host<->device copy asynchronous,
// and getting it is slow: on an H100 machine cuMemHostAlloc takes 0.8 ms
// for 4 KiB..1 MiB, 6.5 ms at 16 MiB and 123 ms at 256 MiB, and freeing it
// costs a third of that. So buffers are cached and handed out again. Where
// to read the rest:
//
//	class.go     size classes and the 1.25x reuse bound
//	options.go   Options, defaults and validation
//	buffer.go    Buffer and the block behind it
//	cache.go     the idle free lists: the hit path and the way back in
//	slab.go      small classes carved from 1 MiB slabs
//	eviction.go  the age list, the cap, EmptyCache
//	free.go      stream-ordered free (RecordStream, Free, Poll)
//	core.go      what Allocator and Direct share: lock, Stats, driver calls, close
//	direct.go    Direct, the uncached baseline for A/B runs

import (
	"errors"
	"os"

	"github.com/accelkit/accelkit/driver"
)

// Allocator caches pinned host buffers of one device. It is safe for
// concurrent use.
type Allocator struct {
	// Locking: one mutex, the embedded core's mu, guards the free lists
	// (buckets), the age list, block and slab states, Buffer.freed and
	// Buffer.streams, closed and the stats. It is held only to take, put and
	// count, never across a driver call (HostAlloc, HostFree) or a call into
	// evpool (event records, Poll, Drain, the host waits of a free), so other
	// callers keep hitting the cache while a slow driver call runs; Deferred
	// callbacks take it themselves. opts, perDbl, pageSize and the core's
	// device and event pool never change after New.

	core
	opts     Options
	perDbl   int
	pageSize int

	// guarded by core.mu
	buckets []blockList
	age     ageNode // sentinel: age.next is the oldest unit
}

// New returns an allocator of dev's pinned host memory.
func New(dev driver.Device, opts Options) (*Allocator, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	a := &Allocator{
		opts:     opts,
		perDbl:   opts.ClassesPerDoubling,
		pageSize: max(os.Getpagesize(), minClassSize),
	}
	if err := a.init(dev, opts.MaxSize, a.putLocked); err != nil {
		return nil, err
	}
	a.age.next, a.age.prev = &a.age, &a.age
	// One bucket per class up to the largest handed-out size; page-rounded
	// buffers share the bucket of the class just below them.
	top := max(classSize(opts.MaxSize, a.perDbl), roundUp(opts.MaxSize, a.pageSize))
	a.buckets = make([]blockList, bucketIndex(top, a.perDbl)+1)
	return a, nil
}

// Device returns the allocator's device.
func (a *Allocator) Device() driver.Device { return a.dev }

// Options returns the options in effect, defaults filled in.
func (a *Allocator) Options() Options { return a.opts }

// rounded is the size a fresh block for a request of n > 0 bytes has.
func (a *Allocator) rounded(n int) int {
	if n > a.opts.PageOnlyThreshold {
		return roundUp(n, a.pageSize)
	}
	return classSize(n, a.perDbl)
}

// RoundedSize is the size of the block a fresh allocation of n bytes gets
// (0 for n <= 0); a cached block serving n may be up to 1.25x n.
func (a *Allocator) RoundedSize(n int) int {
	if n <= 0 {
		return 0
	}
	return a.rounded(n)
}

// Alloc returns a pinned buffer of size bytes. Size 0 gives an empty buffer
// without a driver call; a negative size or one above Options.MaxSize is
// ErrInvalidSize. Driver failures are returned wrapped (errors.Is
// driver.ErrOutOfMemory works). On out of memory every idle buffer and
// wholly idle slab goes back to the driver and the allocation is tried once
// more, if anything went; buffers in use or waiting for their streams stay.
// An out of memory that stands says what this allocator holds and what
// frees pinned memory. After Close it returns ErrClosed.
func (a *Allocator) Alloc(size int) (*Buffer, error) {
	if b, err := a.lockForAlloc(size); b != nil || err != nil {
		return b, err
	}
	// mu is held and the request counted.
	want := a.rounded(size)
	limit := reuseLimit(size, want)
	if blk := a.takeLocked(want, limit); blk != nil {
		a.stats.Hits++
		a.mu.Unlock()
		return &Buffer{c: &a.core, blk: blk, n: size}, nil
	}
	a.stats.Misses++
	epoch := a.epoch
	a.mu.Unlock()

	var (
		blk *block
		err error
	)
	if want < slabClassLimit && size <= a.opts.PageOnlyThreshold {
		blk, err = a.allocSlab(want)
	} else {
		blk, err = a.allocStandalone(want)
	}
	if err != nil {
		a.undoRequest(epoch)
		return nil, err
	}
	return &Buffer{c: &a.core, blk: blk, n: size}, nil
}

// allocStandalone gets a fresh block of want bytes that is a driver
// allocation of its own (a class from 64 KiB up, or a page-rounded size).
func (a *Allocator) allocStandalone(want int) (*block, error) {
	hb, err := a.hostAlloc(want, a.releaseIdle)
	if err != nil {
		return nil, err
	}
	blk := &block{mem: hb.Bytes()[:want:want], hb: hb, bucket: bucketIndex(want, a.perDbl)}
	blk.age.blk = blk
	a.mu.Lock()
	a.useFreshLocked(blk)
	a.mu.Unlock()
	return blk, nil
}

// RecordStream notes that work queued on s uses b, so that after Free the
// buffer is reused only once the work queued on s at Free time completes.
// A nil s is the device's default stream. Recording the same stream twice
// is harmless.
func (a *Allocator) RecordStream(b *Buffer, s driver.Stream) error {
	return a.recordStream(b, s)
}

// Free gives b back. Without recorded streams the buffer is reusable at
// once; otherwise an event is recorded on each recorded stream now and the
// buffer is reusable once they complete. Freeing twice is ErrDoubleFree and
// freeing another allocator's buffer ErrForeignBuffer; neither changes any
// state.
//
// When the events cannot be recorded, Free waits for the streams on the host
// instead. When that fails too (a lost device), nothing shows the streams'
// work over: Free returns an error wrapping evpool.ErrNotReleased and
// changes nothing, so the buffer is still the caller's, with its recorded
// streams, and may be freed again. After Close, Free returns the memory to
// the driver (a slab once all its pieces are back), waiting on the host for
// the recorded streams first.
func (a *Allocator) Free(b *Buffer) error { return a.free(b) }

// Poll makes buffers whose recorded streams have completed reusable and
// reports how many, without blocking. Alloc and EmptyCache poll on their
// own; Poll is for callers that want the Stats to be current.
func (a *Allocator) Poll() int { return a.poll() }

// EmptyCache returns every idle buffer, and every slab whose pieces are all
// idle, to the driver. Buffers in use or waiting for their streams stay.
func (a *Allocator) EmptyCache() error {
	_, err := a.releaseIdle()
	return err
}

// Stats returns a snapshot of the counters; Stats.Map names them as
// PyTorch's torch.cuda.host_memory_stats() does.
func (a *Allocator) Stats() Stats { return a.snapshot() }

// ResetPeakStats sets every peak of Stats to its current value, and the
// longest and shortest driver call times to 0, like PyTorch's
// torch.cuda.reset_peak_host_memory_stats().
func (a *Allocator) ResetPeakStats() { a.resetPeaks() }

// ResetAccumulatedStats sets every cumulative count and time of Stats to 0
// (requests, hits, misses, buffers handed out and returned, driver calls,
// their bytes and times, evictions, retries, out-of-memory failures), like
// PyTorch's torch.cuda.reset_accumulated_host_memory_stats(); current values
// and peaks stay.
func (a *Allocator) ResetAccumulatedStats() { a.resetAccumulated() }

// Close waits for pending frees, returns all idle memory (and idle events)
// to the driver and refuses later Allocs with ErrClosed. It is idempotent
// and safe to call concurrently with the other methods. Buffers still in use
// stay valid; freeing them later returns their memory to the driver (a slab
// once all its pieces are back).
func (a *Allocator) Close() error {
	first, err := a.close()
	if !first {
		return nil
	}
	_, idleErr := a.releaseIdle()
	return errors.Join(err, idleErr)
}
