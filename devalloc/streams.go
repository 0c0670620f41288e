package devalloc

// Stream-ordered reuse: how a block freed after use on other streams comes
// back (evpool.Deferred.Release, with its failure policy), and how a
// stream with no fit takes a block cached for another stream
// (cross_stream_reuse) without a host synchronisation.

import (
	"fmt"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

// free is Free's work: the block back to its free set, now or once its
// streams' work is over.
func (a *Allocator) free(p driver.Ptr) error {
	a.mu.Lock()
	// p's entry goes stale as b leaves stateAllocated.
	var b *block
	if e := a.ptrs.atHome(p); e != nil {
		if liveAt(p, e.b) {
			b = e.b
		}
	} else {
		b = a.ptrs.get(p)
	}
	if b == nil {
		a.mu.Unlock()
		return fmt.Errorf("devalloc: free %v: not a live allocation of this allocator (unknown pointer or double free): %w", p, driver.ErrInvalidPointer)
	}
	fs := b.set
	if b.own {
		// The common case: used only on its own stream, which runs in
		// order, so the block is reusable at once.
		if a.hist != nil {
			a.hist.freePair(b.ptr, b.requested, fs.id, b.stack())
			b.pcs = nil
		}
		a.returnLocked(fs, b)
		a.mu.Unlock()
		return nil
	}
	uses := b.uses
	b.uses = nil
	if a.hist != nil {
		a.hist.free(actFreeRequested, b.ptr, b.requested, b.stream().ID(), b.stack())
	}
	// Wait for the allocation stream (it differs from the owner after a
	// cross-stream reuse) and the noted streams, never for the owner.
	var wait evpool.StreamSet
	wait.Add(b.stream())
	if uses != nil {
		wait.AddSet(*uses)
	}
	wait.Remove(fs.stream)
	a.markPendingLocked(fs, b, true)
	a.mu.Unlock()
	err := a.def.Release(wait, func() {
		a.mu.Lock()
		a.freeLocked(fs, b)
		a.mu.Unlock()
	})
	if err == nil {
		return nil
	}
	// evpool.ErrNotReleased: nothing showed the streams' work over, so the
	// block goes back to the caller exactly as it was.
	a.mu.Lock()
	defer a.mu.Unlock()
	a.markPendingLocked(fs, b, false)
	b.uses = uses
	a.ptrs.put(p, b)
	return fmt.Errorf("devalloc: free %v: the block is still live and the caller's; free it again later: %w", p, err)
}

// markPendingLocked moves b between allocated and pending free (undo with
// pending false). a.mu held.
func (a *Allocator) markPendingLocked(fs *freeSet, b *block, pending bool) {
	sign := int64(1)
	if pending {
		sign = -1
		b.state = statePendingFree
	} else {
		b.state = stateAllocated
	}
	var d delta
	d.pool = poolIdx(fs.small)
	d.add(stAllocation, sign)
	d.add(stAllocatedBytes, sign*int64(b.size))
	d.add(stRequestedBytes, sign*int64(b.requested))
	if a.oversize(b) {
		d.oversizeAlloc = sign
	}
	a.applyLocked(&d)
}

// takeCross takes a fitting free block from another stream's set of the
// same pool, the first set in creation order that has one, and orders the
// requester after the giver's work. It looks at no set when no free block
// of the pool is large enough, and at a set only when its largest block
// is.
func (a *Allocator) takeCross(id uint64, small bool, rsize, size uint64, s driver.Stream) *block {
	var b *block
	var giver *freeSet
	a.mu.Lock()
	if a.largestFreeLocked(small) >= rsize {
		for fs := a.setHead; fs != nil && b == nil; fs = fs.nextSet {
			a.visits++
			if fs.small != small || fs.id == id {
				continue
			}
			if l := fs.free.largest(); l == nil || l.size < rsize {
				continue
			}
			b, giver = a.takeLocked(fs, rsize, size, s, evpool.SameStream(s, fs.stream)), fs
		}
	}
	a.mu.Unlock()
	if b == nil {
		return nil
	}
	if err := a.orderAfter(s, giver.stream); err != nil {
		// The taker never used the block: give it straight back.
		a.mu.Lock()
		a.freeLocked(giver, b) // b's pointer table entry goes stale
		a.mu.Unlock()
		return nil
	}
	a.count(func(c *counters) { c.numCrossStreamReuse++ })
	return b
}

// orderAfter makes later work on s wait for the work queued on giver now.
func (a *Allocator) orderAfter(s, giver driver.Stream) error {
	ev, err := a.evs.Get()
	if err != nil {
		return err
	}
	if err := ev.Record(giver); err != nil {
		a.evs.Put(ev)
		return err
	}
	err = s.WaitEvent(ev)
	// WaitEvent captures the event's position, so the event can be
	// recycled at once.
	a.evs.Put(ev)
	return err
}
