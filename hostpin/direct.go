package hostpin

// Direct: the uncached baseline. Every Alloc is a driver HostAlloc of the
// exact size and every Free a driver HostFree, once the buffer's recorded
// streams' work is over: the Allocator's surface without its cache, as a
// resource of its own (in the style of RMM's composable memory resources)
// rather than a mode flag tested on the Allocator's hot path. A/B runs
// (and the Stager, through Source) take either.

import (
	"github.com/accelkit/accelkit/driver"
)

// Direct hands out pinned host buffers of one device straight from the
// driver, with stream-ordered frees and the Allocator's Stats. It is safe
// for concurrent use.
type Direct struct {
	// Locking: the embedded core's mu guards Buffer.freed and Buffer.streams,
	// block states, closed and the stats, and is never held across a driver
	// call or a call into evpool. opts and the core's device and event pool
	// never change after NewDirect.

	core
	opts DirectOptions
}

// NewDirect returns an uncached allocator of dev's pinned host memory.
func NewDirect(dev driver.Device, opts DirectOptions) (*Direct, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Direct{opts: opts}
	if err := d.init(dev, opts.MaxSize, d.handBackLocked); err != nil {
		return nil, err
	}
	return d, nil
}

// handBackLocked is Direct's core.idleLocked: a block nobody uses any more
// goes back to the driver.
func (d *Direct) handBackLocked(b *block) []unit {
	b.state = stateIdle
	return []unit{b.hb}
}

// Device returns the device.
func (d *Direct) Device() driver.Device { return d.dev }

// Options returns the options in effect, defaults filled in.
func (d *Direct) Options() DirectOptions { return d.opts }

// RoundedSize is the size of the block an allocation of n bytes gets: n
// itself (0 for n <= 0), since Direct does not round.
func (d *Direct) RoundedSize(n int) int { return max(n, 0) }

// Alloc returns a pinned buffer of exactly size bytes from a driver
// HostAlloc. Size 0 gives an empty buffer without a driver call; a negative
// size or one above DirectOptions.MaxSize is ErrInvalidSize. Driver failures
// are returned wrapped; an out of memory is not retried (there is no cache
// to release) and says what this Direct holds and what frees pinned memory.
// After Close it returns ErrClosed.
func (d *Direct) Alloc(size int) (*Buffer, error) {
	if b, err := d.lockForAlloc(size); b != nil || err != nil {
		return b, err
	}
	// mu is held and the request counted.
	d.stats.Misses++
	epoch := d.epoch
	d.mu.Unlock()
	hb, err := d.hostAlloc(size, nil) // nothing cached to release on out of memory
	if err != nil {
		d.undoRequest(epoch)
		return nil, err
	}
	blk := &block{mem: hb.Bytes()[:size:size], hb: hb}
	d.mu.Lock()
	d.useFreshLocked(blk)
	d.mu.Unlock()
	return &Buffer{c: &d.core, blk: blk, n: size}, nil
}

// RecordStream notes that work queued on s uses b, so that after Free the
// driver free waits for the work queued on s at Free time. A nil s is the
// device's default stream. Recording the same stream twice is harmless.
func (d *Direct) RecordStream(b *Buffer, s driver.Stream) error {
	return d.recordStream(b, s)
}

// Free returns b to the driver: at once without recorded streams, otherwise
// once the work queued on them now has completed. The errors and the failure
// policy are the Allocator's (see Allocator.Free): a Free that cannot show
// the streams' work over changes nothing and the buffer stays the caller's.
func (d *Direct) Free(b *Buffer) error { return d.free(b) }

// Poll returns to the driver the buffers whose recorded streams have
// completed and reports how many, without blocking. Alloc polls on its own.
func (d *Direct) Poll() int { return d.poll() }

// Stats returns a snapshot of the counters; Stats.Map names them as
// PyTorch's torch.cuda.host_memory_stats() does.
func (d *Direct) Stats() Stats { return d.snapshot() }

// ResetPeakStats sets every peak of Stats to its current value, and the
// longest and shortest driver call times to 0 (Allocator.ResetPeakStats).
func (d *Direct) ResetPeakStats() { d.resetPeaks() }

// ResetAccumulatedStats sets every cumulative count and time of Stats to 0
// (Allocator.ResetAccumulatedStats); current values and peaks stay.
func (d *Direct) ResetAccumulatedStats() { d.resetAccumulated() }

// Close waits for pending frees, returns idle events to the driver and
// refuses later Allocs with ErrClosed. It is idempotent and safe to call
// concurrently with the other methods. Buffers still in use stay valid;
// freeing them later returns them to the driver.
func (d *Direct) Close() error {
	_, err := d.close()
	return err
}
