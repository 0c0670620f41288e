package hostpin

// Stream-ordered free, shared by the Allocator and Direct.
//
// RecordStream notes the streams whose queued work reads or writes a buffer
// (an evpool.StreamSet: a stream recorded twice is kept once). Free hands
// the block to evpool.Deferred.Release with those streams: it becomes idle
// only once the work queued on them at Free time is over, collected by
// polling at the next Alloc (cost: the streams with pending work, not the
// pending buffers), by Poll, EmptyCache and Close. The failure policy is
// evpool's (see Release): when events cannot be recorded, Release waits for
// the streams on the host; when nothing can show their work over (a lost
// device), the release does not run and Free undoes itself, so the buffer is
// the caller's again, exactly as before the call, and may be freed later.
// No failure path reuses a buffer early, and none leaks it.

import (
	"fmt"
	"sync"

	"github.com/accelkit/accelkit/driver"
)

// check reports whether b may be given to c.
func (c *core) check(b *Buffer) error {
	if b == nil {
		return ErrNilBuffer
	}
	if b.c != c {
		return ErrForeignBuffer
	}
	return nil
}

// recordStream notes that work queued on s uses b; nil is the default
// stream.
func (c *core) recordStream(b *Buffer, s driver.Stream) error {
	if err := c.check(b); err != nil {
		return err
	}
	if b.blk == nil {
		return nil // empty buffer: nothing to protect
	}
	s = driver.StreamOr(c.dev, s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.freed {
		return fmt.Errorf("%w: RecordStream after Free", ErrDoubleFree) // the sentinel names the package
	}
	b.streams.Add(s)
	return nil
}

// free gives b back, in stream order (see the file comment).
func (c *core) free(b *Buffer) error {
	if err := c.check(b); err != nil {
		return err
	}
	c.mu.Lock()
	if b.freed {
		c.mu.Unlock()
		return ErrDoubleFree
	}
	b.freed = true
	blk := b.blk
	if blk == nil {
		c.mu.Unlock()
		return nil
	}
	size := int64(len(blk.mem))
	c.stats.BytesInUse -= size
	if b.streams.Len() == 0 {
		// What Release does with no streams, without the closure it would
		// allocate: this is the hot path of a cached Alloc and Free.
		victims := c.returnLocked(blk)
		c.mu.Unlock()
		return c.freeUnits(victims)
	}
	blk.state = statePending
	c.stats.BytesPending += size
	// b.freed keeps RecordStream off b.streams while Release reads them.
	streams := b.streams
	c.mu.Unlock()

	var now releaseErr
	err := c.deferred.Release(streams, func() { now.set(c.release(blk, size)) })
	if err != nil {
		// evpool.ErrNotReleased: the release did not run and never will.
		c.mu.Lock()
		blk.state = stateInUse
		c.stats.BytesPending -= size
		c.stats.BytesInUse += size
		b.freed = false
		c.mu.Unlock()
		return fmt.Errorf("hostpin: free of a %d-byte buffer: its streams' work cannot be shown over, so the buffer is still the caller's, unchanged, and may be freed again: %w", size, err)
	}
	if err := now.take(); err != nil {
		return err
	}
	c.drainIfClosed()
	return nil
}

// release makes a pending block idle once its streams' work is over: the
// function a stream-ordered free gives Release.
func (c *core) release(blk *block, size int64) error {
	c.mu.Lock()
	c.stats.BytesPending -= size
	victims := c.returnLocked(blk)
	c.mu.Unlock()
	return c.freeUnits(victims)
}

// drainIfClosed runs the deferred frees when c is closed. A Free racing
// Close may defer its release after Close's Drain looked: Close sets closed
// before it drains, so either that Drain sees the release or this check
// sees closed, and no release is left waiting for a Poll that may never
// come.
func (c *core) drainIfClosed() {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed && c.deferred.Pending() > 0 {
		_ = c.deferred.Drain() // stream errors: see core.close
	}
}

// releaseErr carries the driver-free error of a release that runs inside
// Release (events not recorded, the streams waited for on the host) back to
// Free. A release that Poll or Drain runs later finds Free returned:
// no caller is left to tell, and Stats still counts the driver frees.
type releaseErr struct {
	mu    sync.Mutex
	taken bool // Free has read err
	err   error
}

func (r *releaseErr) set(err error) {
	r.mu.Lock()
	if !r.taken {
		r.err = err
	}
	r.mu.Unlock()
}

func (r *releaseErr) take() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.taken = true
	return r.err
}

// poll makes blocks whose streams' work is over idle and reports how many.
func (c *core) poll() int { return c.deferred.Poll() }
