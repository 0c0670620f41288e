package devalloc

// Fitting, splitting and merging: how a request is rounded, which cached
// block serves it (best fit under the oversize rules), how a block is split
// when taken and merged with its free neighbours when it comes back.

import (
	"math/bits"

	"github.com/accelkit/accelkit/driver"
)

// Sizes, named as in PyTorch, with their reasons.
const (
	// kMinBlockSize: every size is a multiple of it; alignment for any
	// element type and vectorised access, and the smallest useful split.
	kMinBlockSize = 512
	// kSmallSize: requests up to 1 MiB are "small" and share 2 MiB segments.
	kSmallSize = 1 << 20
	// kSmallBuffer: the small pool's segment size.
	kSmallBuffer = 2 << 20
	// kLargeBuffer: segment size for large requests under kMinLargeAlloc, so
	// that several 1-10 MiB tensors share one driver allocation.
	kLargeBuffer = 20 << 20
	// kMinLargeAlloc: from here on a request gets a segment of its own.
	kMinLargeAlloc = 10 << 20
	// kRoundLarge: rounding of those own segments (the driver's page size).
	kRoundLarge = 2 << 20
	// maxRequest: larger requests are refused as bad input rather than
	// sent to the driver: no device has a petabyte, and the rounding
	// arithmetic stays far from overflow.
	maxRequest = 1 << 50
)

// roundSize is PyTorch's round_size; small enough to inline without
// roundup_power2_divisions.
func (a *Allocator) roundSize(size uint64) uint64 {
	if size < kMinBlockSize {
		return kMinBlockSize
	}
	if !a.pow2Rounding {
		return (size + kMinBlockSize - 1) &^ (kMinBlockSize - 1)
	}
	return a.roundPow2(size)
}

// roundPow2 is roundSize with roundup_power2_divisions.
func (a *Allocator) roundPow2(size uint64) uint64 {
	if d := a.divisions(size); d > 1 && size > kMinBlockSize*d {
		return roundupPower2Division(size, d)
	}
	return (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize
}

func (a *Allocator) divisions(size uint64) uint64 {
	idx := bits.Len64(size) - 1 - 20 // intervals start at 1 MiB
	idx = max(0, min(idx, RoundupIntervals-1))
	return a.cfg.RoundupPower2Divisions[idx]
}

// roundupPower2Division rounds size up to the next of d equal steps between
// the powers of two around it.
func roundupPower2Division(size, d uint64) uint64 {
	if size&(size-1) == 0 {
		return size
	}
	floor := uint64(1) << (bits.Len64(size) - 1)
	step := floor >> (bits.Len64(d) - 1)
	if step == 0 {
		return floor << 1
	}
	r := size &^ (step - 1)
	if r == size {
		return size
	}
	return r + step
}

// allocationSize is PyTorch's get_allocation_size: the segment to create
// for a rounded request.
func allocationSize(rsize uint64) uint64 {
	switch {
	case rsize <= kSmallSize:
		return kSmallBuffer
	case rsize < kMinLargeAlloc:
		return kLargeBuffer
	}
	return (rsize + kRoundLarge - 1) / kRoundLarge * kRoundLarge
}

// oversize reports whether b is an oversize block: one of a plain segment
// of at least max_split_size. A block inside an expandable range never is:
// the rule keeps a large plain segment whole so that small requests do not
// carve it into pieces that pin the whole segment, but an expandable
// range releases any free whole page and merges free memory with the
// pages mapped beside it, so there is nothing to keep whole. Applying it
// there (PyTorch does, pytorch/pytorch#123548) refuses every merged free
// block past the size to small requests, each such miss maps new pages
// that merge into that block, and reserved memory grows without bound.
// It reads only settings fixed by New and the block's segment.
func (a *Allocator) oversize(b *block) bool {
	return a.maxSplit != 0 && b.size >= a.maxSplit && !b.exp
}

// fits applies the oversize rules to a candidate block; it reads only
// settings fixed by New. Blocks of expandable ranges fit any request they
// hold (see oversize): they are split like small-pool blocks.
func (a *Allocator) fits(b *block, rsize uint64) bool {
	if a.maxSplit == 0 || b.exp {
		return true
	}
	if rsize < a.maxSplit && b.size >= a.maxSplit {
		return false // do not hand an oversize block to a small request
	}
	// b.size >= rsize (a fit), so the difference cannot wrap, where
	// rsize+maxNonSplit would for max_non_split_rounding near its bound.
	if rsize >= a.maxSplit && b.size-rsize >= a.maxNonSplit {
		return false // nor one far larger than an oversize request
	}
	return true
}

// takeLocked takes the best fit from fs and commits it; own says s is
// fs's stream (evpool.SameStream). a.mu held.
func (a *Allocator) takeLocked(fs *freeSet, rsize, size uint64, s driver.Stream, own bool) *block {
	b, ch := fs.free.fit(rsize)
	if b == nil || !a.fits(b, rsize) {
		return nil
	}
	fs.free.take(b, ch)
	a.commitLocked(fs, b, rsize, size, s, own)
	return b
}

// hitLocked is the common cache hit as one call: a request on fs's own
// stream, history off, served whole by the lowest-address block of exactly
// rsize bytes, which is on no release list and needs no split (nine hits
// in ten in BenchmarkHitPair). It does for that block what takeLocked's
// fit, take and commitLocked do, without their calls: Go keeps no
// register across a call, so each one spilled and reloaded the hit's
// state. It returns nil, having changed nothing, when the case does not
// apply, and the caller takes the general path. Keep the two in step:
// TestHitPathMatchesGeneralPath checks each hit against a best fit found
// by scanning the set and its counters against the blocks. a.mu held.
func (a *Allocator) hitLocked(fs *freeSet, rsize, size uint64) *block {
	set := &fs.free
	c := rsize >> classShift
	w := c >> 6
	if a.hist != nil || w >= uint64(len(set.pages)) || set.pages[w] == nil {
		return nil
	}
	ch := &set.pages[w][c&63]
	p, b := ch.top.ptr, ch.top.b
	if ch.live == 0 || !ch.top.valid(c) || b.size != rsize || b.rlist != listNone || !a.fits(b, rsize) {
		return nil
	}
	// The pointer table's slot is found from the address in the heap
	// entry (b.ptr, once valid), not from the block: the slot's load does
	// not wait for the block's, and both are likely cache misses.
	if e := a.ptrs.atHome(p); e != nil {
		e.b = b
	} else {
		a.ptrs.put(p, b)
	}
	// blockSet.take, for a block on no release list.
	b.hgen++
	ch.taken()
	set.n--
	if x := set.idx; x != nil {
		x.max[boolBit(set.small)].removed(b.size)
	}
	// commitLocked, for a block taken whole on its owner's stream.
	st, pool := &a.st, poolIdx(fs.small)
	if inactiveSplit(b) {
		st.dec(stInactiveSplit, pool, 1)
		st.dec(stInactiveSplitBytes, pool, int64(b.size))
	}
	b.state = stateAllocated
	b.requested = size
	b.own = true
	if a.oversize(b) {
		st.oversizeAllocations.add(1)
	}
	st.numAllocs++
	st.largestAlloc = max(st.largestAlloc, b.size)
	st.committed(pool, int64(b.size), int64(size))
	return b
}

// inactiveSplit reports whether b counts in the inactive_split stats: a
// free block of a plain segment that is split.
func inactiveSplit(b *block) bool {
	return b.state == stateFree && !b.exp && (b.prev != nil || b.next != nil)
}

// shouldSplitLocked reports whether taking rsize bytes of b leaves a
// remainder worth a block of its own. a.mu held.
func (a *Allocator) shouldSplitLocked(fs *freeSet, b *block, rsize uint64) bool {
	rem := b.size - rsize
	if fs.small || b.exp {
		return rem >= kMinBlockSize
	}
	return (a.maxSplit == 0 || rsize < a.maxSplit) && rem > kSmallSize
}

// commitLocked marks b (already out of the free set) allocated for a
// request on s, splitting off the remainder, and publishes it in the
// pointer map; own says s is fs's stream (evpool.SameStream). a.mu held.
func (a *Allocator) commitLocked(fs *freeSet, b *block, rsize, size uint64, s driver.Stream, own bool) {
	c, pool := &a.st, poolIdx(fs.small)
	if inactiveSplit(b) {
		c.dec(stInactiveSplit, pool, 1)
		c.dec(stInactiveSplitBytes, pool, int64(b.size))
	}
	if a.shouldSplitLocked(fs, b, rsize) {
		r := fs.newBlock()
		*r = block{ptr: b.ptr + driver.Ptr(rsize), size: b.size - rsize, seg: b.seg, set: b.set, exp: b.exp, freedAt: b.freedAt, hgen: r.hgen}
		insertAfter(b, r)
		b.size = rsize
		fs.free.insert(r)
		if inactiveSplit(r) {
			c.inc(stInactiveSplit, pool, 1)
			c.inc(stInactiveSplitBytes, pool, int64(r.size))
		}
	}
	b.state = stateAllocated
	b.requested = size
	if !own { // else left nil: stream() is the owner's, and the hit writes one line of b
		b.allocStream = s
	}
	b.own = own
	c.committed(pool, int64(b.size), int64(size))
	if a.oversize(b) {
		c.oversizeAllocations.add(1)
	}
	c.numAllocs++
	c.largestAlloc = max(c.largestAlloc, b.size)
	a.ptrs.put(b.ptr, b)
	if a.hist != nil {
		if pcs := a.hist.alloc(b.ptr, size, s.ID()); pcs != nil {
			b.pcs = &pcs
		}
	}
}

// freeLocked returns an allocated or pending block to the free set, merging
// it with free neighbours, and records its free_completed. a.mu held.
func (a *Allocator) freeLocked(fs *freeSet, b *block) {
	if a.hist != nil {
		a.hist.free(actFreeCompleted, b.ptr, b.requested, b.stream().ID(), b.stack())
		b.pcs = nil
	}
	a.returnLocked(fs, b)
}

// returnLocked is freeLocked without the trace entry: Free records the
// free_requested and free_completed of a block reusable at once together
// (history.freePair). a.mu held.
func (a *Allocator) returnLocked(fs *freeSet, b *block) {
	c, pool := &a.st, poolIdx(fs.small)
	if b.state == stateAllocated {
		c.dec(stAllocation, pool, 1)
		c.dec(stAllocatedBytes, pool, int64(b.size))
		c.dec(stRequestedBytes, pool, int64(b.requested))
		if a.oversize(b) {
			c.oversizeAllocations.add(-1)
		}
	}
	c.dec(stActive, pool, 1)
	c.dec(stActiveBytes, pool, int64(b.size))
	b.state = stateFree
	if !b.own { // an own block has neither (block.own)
		b.uses = nil
		b.allocStream = nil
	}
	b.own = false
	b.requested = 0
	b.freedAt = a.rel.nextFreed()
	if n := b.prev; n != nil && n.state == stateFree {
		a.mergeLocked(fs, b, n)
	}
	if n := b.next; n != nil && n.state == stateFree {
		a.mergeLocked(fs, b, n)
	}
	if inactiveSplit(b) {
		c.inc(stInactiveSplit, pool, 1)
		c.inc(stInactiveSplitBytes, pool, int64(b.size))
	}
	if !fs.free.revive(b) {
		fs.free.insert(b)
	}
}

// mergeLocked merges n, a free neighbour of b, into b. a.mu held.
func (a *Allocator) mergeLocked(fs *freeSet, b, n *block) {
	if inactiveSplit(n) {
		pool := poolIdx(fs.small)
		a.st.dec(stInactiveSplit, pool, 1)
		a.st.dec(stInactiveSplitBytes, pool, int64(n.size))
	}
	fs.free.remove(n)
	absorb(b, n)
	fs.recycle(n)
}
