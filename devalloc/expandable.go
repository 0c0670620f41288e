package devalloc

// Expandable segments. On a driver.VMM device each (stream, pool) maps its
// memory into reserved virtual ranges of 9/8 of the device's memory each
// (PyTorch's margin: spare address space lets a request go past pages that
// stay mapped under live blocks). A range is tiled by blocks: allocated,
// free (mapped) and unmapped ("holes": page-aligned, never adjacent to each
// other). A miss maps pages into the lowest hole that, with the free blocks
// around it, gives a run of address space large enough, in the oldest
// range that has one; only when live blocks leave no such run anywhere is
// another range reserved. One MemCreate and MemMap per page (Granularity,
// 2 MiB on CUDA and sim) but one SetAccess per mapped range: on an H100,
// SetAccess is ~46 us per call against ~13 us for MemCreate and ~1 us for
// MemMap per page.
//
// Release (EmptyCache and the OOM path) unmaps every free whole page,
// wherever it lies: between live blocks too, which is what lets another
// stream or pool map that memory. A range is returned when nothing in it
// is mapped. Both come from the release indexes (index.go): the free
// blocks that hold a whole page, and the ranges with nothing mapped.
//
// The range itself, type expandable, owns every VMM call made on it
// (reserve, map, unmap, free); the Allocator methods below keep the blocks
// that tile it, the free sets and the counters.

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

// expandable is one expandable range: the address space reserved, the
// physical pages mapped into it and its holes (the unmapped blocks). It
// owns every VMM call made on the range: reserve, map, unmap, free. The
// allocator keeps the blocks that tile the range and the counters, and
// calls these methods with a.mu held.
type expandable struct {
	vmm    driver.VMM
	gran   uint64                      // the VMM page
	base   driver.Ptr                  // start of the reserved address space
	va     uint64                      // bytes of address space reserved
	mapped uint64                      // bytes mapped
	pages  map[uint64]driver.MemHandle // page index -> its physical memory
	holes  []*block                    // the unmapped blocks, by address
}

// reserveRange reserves va bytes of address space for a new range.
func reserveRange(vmm driver.VMM, gran, va uint64) (*expandable, error) {
	base, err := vmm.AddressReserve(va, 0)
	if err != nil {
		return nil, fmt.Errorf("devalloc: reserve %s of address space: %w", formatBytes(va), err)
	}
	return &expandable{vmm: vmm, gran: gran, base: base, va: va, pages: map[uint64]driver.MemHandle{}}, nil
}

// mapPages backs [p, p+n) of the range (whole pages, unmapped) with new
// physical pages: one MemCreate and MemMap per page, then one SetAccess
// for the lot, since SetAccess dominates the cost on CUDA. On error
// nothing is mapped and the error is returned.
func (e *expandable) mapPages(p driver.Ptr, n uint64) error {
	pages := int(n / e.gran)
	handles := make([]driver.MemHandle, 0, pages)
	undo := func(err error) error {
		// Best-effort cleanup after err, which is what the caller gets;
		// a failure here leaves nothing better to do.
		if len(handles) > 0 {
			_ = e.vmm.MemUnmap(p, uint64(len(handles))*e.gran)
		}
		for _, mh := range handles {
			_ = e.vmm.MemRelease(mh)
		}
		return err
	}
	for i := range pages {
		mh, err := e.vmm.MemCreate(e.gran)
		if err != nil {
			return undo(err)
		}
		if err := e.vmm.MemMap(p+driver.Ptr(uint64(i)*e.gran), e.gran, 0, mh); err != nil {
			_ = e.vmm.MemRelease(mh) // unmapped handle; best effort, err is what matters
			return undo(err)
		}
		handles = append(handles, mh)
	}
	if err := e.vmm.SetAccess(p, n); err != nil {
		return undo(err)
	}
	first := uint64(p-e.base) / e.gran
	for i, mh := range handles {
		e.pages[first+uint64(i)] = mh
	}
	e.mapped += n
	return nil
}

// unmapPages unmaps [p, p+n) of the range (whole pages, mapped) and
// releases their physical memory. unmapped is false when the unmap failed
// and nothing changed; release failures come with unmapped true, the
// pages unmapped either way.
func (e *expandable) unmapPages(p driver.Ptr, n uint64) (unmapped bool, err error) {
	if err := e.vmm.MemUnmap(p, n); err != nil {
		return false, fmt.Errorf("devalloc: unmap %s at %v of an expandable range: %w", formatBytes(n), p, err)
	}
	var errs []error
	first := uint64(p-e.base) / e.gran
	for i := first; i < first+n/e.gran; i++ {
		if err := e.vmm.MemRelease(e.pages[i]); err != nil {
			errs = append(errs, err)
		}
		delete(e.pages, i)
	}
	e.mapped -= n
	return true, errors.Join(errs...)
}

// free returns the range's address space; nothing may be mapped in it.
func (e *expandable) free() error {
	if err := e.vmm.AddressFree(e.base, e.va); err != nil {
		return fmt.Errorf("devalloc: free expandable address range: %w", err)
	}
	return nil
}

func (e *expandable) holeIndex(b *block) (int, bool) {
	return slices.BinarySearchFunc(e.holes, b.ptr, func(h *block, p driver.Ptr) int {
		switch {
		case h.ptr < p:
			return -1
		case h.ptr > p:
			return 1
		}
		return 0
	})
}

func (e *expandable) addHole(b *block) {
	i, _ := e.holeIndex(b)
	e.holes = slices.Insert(e.holes, i, b)
}

func (e *expandable) removeHole(b *block) {
	if i, ok := e.holeIndex(b); ok && e.holes[i] == b {
		e.holes = slices.Delete(e.holes, i, i+1)
	}
}

// vaSize is the address space of one expandable range.
func (a *Allocator) vaSize() uint64 {
	return (a.total/8*9 + a.gran - 1) / a.gran * a.gran
}

func (a *Allocator) roundPage(n uint64) uint64 { return (n + a.gran - 1) / a.gran * a.gran }

func (a *Allocator) growExpandableLocked(fs *freeSet, rsize, size uint64, s driver.Stream) (*block, error) {
	var b *block
	for _, seg := range fs.exps {
		if b = findRun(seg, rsize); b != nil {
			break
		}
	}
	if b == nil {
		// No range has room: live blocks spread over the address space
		// can leave no run long enough while the device has memory.
		// Reserve another range, as PyTorch does.
		if !a.cfg.KeepCacheOnGrow {
			a.releaseOthersLocked(fs, a.roundPage(rsize))
		}
		if rsize > a.vaSize() {
			return nil, fmt.Errorf("devalloc: %s is more than an expandable range holds (%s): %w",
				formatBytes(rsize), formatBytes(a.vaSize()), driver.ErrOutOfMemory)
		}
		seg, err := a.newRangeLocked(fs)
		if err != nil {
			return nil, err
		}
		b = seg.head
	}
	// The run alternates free blocks and holes. Each mapping merges the
	// new pages with the free blocks on both sides, so b grows from the
	// run's start until it fits; a failed mapping leaves what was mapped
	// as ordinary free cache.
	if !a.cfg.KeepCacheOnGrow {
		a.releaseOthersLocked(fs, a.mapNeed(b, rsize))
	}
	var err error
	if b.state == stateUnmapped {
		if b, err = a.mapHoleLocked(fs, b, min(b.size, a.roundPage(rsize))); err != nil {
			return nil, err
		}
	}
	for b.size < rsize {
		h := b.next
		if h == nil || h.state != stateUnmapped {
			// findRun saw enough address space; only a bug gets here.
			return nil, fmt.Errorf("devalloc: expandable range of stream %d: run at %v ends at %s of %s: %w",
				fs.stream.ID(), b.ptr, formatBytes(b.size), formatBytes(rsize), driver.ErrOutOfMemory)
		}
		if b, err = a.mapHoleLocked(fs, h, min(h.size, a.roundPage(rsize-b.size))); err != nil {
			return nil, err
		}
	}
	fs.free.remove(b)
	a.commitLocked(fs, b, rsize, size, s, evpool.SameStream(s, fs.stream))
	return b, nil
}

// mapNeed returns the bytes growExpandableLocked maps for rsize bytes in
// the run that starts at b: the holes it fills, whole pages, up to where
// the run holds rsize.
func (a *Allocator) mapNeed(b *block, rsize uint64) uint64 {
	var have, need uint64
	for x := b; x != nil && have < rsize; x = x.next {
		if x.state == stateFree {
			have += x.size
			continue
		}
		m := min(x.size, a.roundPage(rsize-have))
		need, have = need+m, have+m
	}
	return need
}

// releaseOthersLocked is release-before-growing for expandable segments:
// before fs maps need more bytes, it unmaps the free whole pages that
// other streams' large-pool ranges hold, oldest freed first, until they
// cover the part of need that would take reserved memory past its
// high-water mark (releaseTarget), and no more: an unmap under the mark
// lowers no peak, and its owner maps the page again at its next large
// request (on the training trace, 14 pages a step at the same peak). It
// runs under a.mu, so it never waits: only pages of streams whose queued
// work has all finished (Stream.Query) are taken, and a busy stream's
// pages stay for a later grow (EmptyCache and the OOM path synchronise
// instead). The free pages of fs's stream stay mapped, those of its
// large-pool ranges too when fs is its small pool: the run being grown
// may take them, and a later request of the stream merges them with new
// pages, which is what keeps expandable segments unfragmented. a.mu held.
func (a *Allocator) releaseOthersLocked(fs *freeSet, need uint64) {
	if need = a.releaseTarget(need); need == 0 {
		return
	}
	l := &a.rel.page[0]
	// The stream's own large-pool pages stay, for its small pool's grows
	// too: the stream maps them again at its next large request.
	own, mine := fs, 0
	if fs.small {
		own = a.lookupLocked(fs.id, false)
	}
	if own != nil {
		mine = own.free.onPage
	}
	if l.n == mine {
		return
	}
	var freed uint64
	var released int64
	var idle, busy []*freeSet // owners asked, by answer
	for b := l.head; b != nil && freed < need; {
		// unmapFreeLocked takes b off the list and puts on it at most
		// the mapped rest of b, at the tail, so the next one stays valid.
		a.visits++
		next := b.rnext
		owner := b.set
		if owner != own && !slices.Contains(busy, owner) && !slices.Contains(idle, owner) {
			// A stream whose work failed will never run it: its memory
			// may go, as in freeSegments.
			if done, err := owner.stream.Query(); done || err != nil {
				idle = append(idle, owner)
			} else {
				busy = append(busy, owner)
			}
		}
		if owner != own && slices.Contains(idle, owner) {
			// A failed unmap leaves the pages mapped and counted; the
			// grow goes on either way.
			n, _ := a.unmapFreeLocked(owner, b, need-freed)
			if n > 0 {
				freed += n
				released++
			}
		}
		b = next
	}
	a.st.numGrowReleases += released
}

// newRangeLocked reserves a new expandable range for fs: one hole. a.mu
// held.
func (a *Allocator) newRangeLocked(fs *freeSet) (*segment, error) {
	va := a.vaSize()
	e, err := reserveRange(a.vmm, a.gran, va)
	if err != nil {
		return nil, err
	}
	base := e.base
	seg := &segment{ptr: base, size: va, set: fs, exp: e}
	hole := fs.newBlock()
	*hole = block{ptr: base, size: va, seg: seg, set: seg.set, exp: true, state: stateUnmapped, hgen: hole.hgen}
	seg.head, seg.tail = hole, hole
	seg.exp.holes = []*block{hole}
	fs.exps = append(fs.exps, seg)
	fs.segs[seg] = struct{}{}
	a.setRangeEmptyLocked(seg, true)
	var d delta
	d.pool = poolIdx(fs.small)
	d.add(stSegment, 1)
	a.applyLocked(&d)
	return seg, nil
}

// findRun returns the start of the lowest run of free blocks and holes in
// seg that holds rsize bytes and contains a hole, or nil. The run starts at
// a hole or at the free block just before one; a run of free blocks alone
// would be one merged free block that takeLocked already refused. a.mu held.
func findRun(seg *segment, rsize uint64) *block {
	for _, h := range seg.exp.holes {
		c := h
		if p := h.prev; p != nil && p.state == stateFree {
			c = p
		}
		var n uint64
		for x := c; x != nil && n < rsize && (x.state == stateFree || x.state == stateUnmapped); x = x.next {
			n += x.size
		}
		if n >= rsize {
			return c
		}
	}
	return nil
}

// mapHoleLocked maps the first n bytes (whole pages) of hole h and returns
// the free block they became, merged with its free neighbours and in the
// free set. On error nothing has changed. a.mu held.
func (a *Allocator) mapHoleLocked(fs *freeSet, h *block, n uint64) (*block, error) {
	seg := h.seg
	if !a.reserve(n) {
		return nil, fmt.Errorf("%w: %w", errLimit, driver.ErrOutOfMemory)
	}
	if err := seg.exp.mapPages(h.ptr, n); err != nil {
		a.unreserve(n)
		return nil, err
	}
	a.raiseHighWater()
	a.setRangeEmptyLocked(seg, false)
	seg.exp.removeHole(h)
	if n < h.size {
		rest := fs.newBlock()
		*rest = block{ptr: h.ptr + driver.Ptr(n), size: h.size - n, seg: seg, set: seg.set, exp: true, state: stateUnmapped, hgen: rest.hgen}
		insertAfter(h, rest)
		h.size = n
		seg.exp.addHole(rest)
	}
	h.state = stateFree
	h.freedAt = a.rel.nextFreed()
	mapped := h.ptr // the trace entry says where the pages went, not where the merged block starts
	for _, x := range [2]*block{h.prev, h.next} {
		if x != nil && x.state == stateFree {
			fs.free.remove(x)
			absorb(h, x)
			fs.recycle(x)
		}
	}
	fs.free.insert(h)
	var d delta
	d.pool = poolIdx(fs.small)
	d.add(stReservedBytes, int64(n))
	d.deviceAllocs = int64(n / a.gran)
	a.applyLocked(&d)
	if a.hist != nil {
		a.hist.add(actSegmentMap, mapped, n, fs.stream.ID())
	}
	return h, nil
}

// setRangeEmptyLocked records whether nothing in range seg is mapped
// (emptyRanges), so that a release returns it. a.mu held.
func (a *Allocator) setRangeEmptyLocked(seg *segment, empty bool) {
	if !empty {
		delete(a.emptyRanges, seg)
		return
	}
	if a.emptyRanges == nil {
		a.emptyRanges = map[*segment]struct{}{}
	}
	a.emptyRanges[seg] = struct{}{}
}

// shrinkLocked unmaps every free whole page of every expandable range
// (the page list), each set's stream synchronised first, and returns each range
// in which nothing stays mapped (emptyRanges). a.mu held.
func (a *Allocator) shrinkLocked() error {
	var errs []error
	synced := make(map[*freeSet]bool)
	for i := range a.rel.page {
		for b := a.rel.page[i].head; b != nil; {
			// unmapFreeLocked takes b off the list (or, failing, leaves
			// it as it was) and puts no block of less than a page on it,
			// so the next one stays valid.
			a.visits++
			next := b.rnext
			fs := b.set
			if !synced[fs] {
				synced[fs] = true
				_ = fs.stream.Synchronize() // as in freeSegments
			}
			if _, err := a.unmapFreeLocked(fs, b, math.MaxUint64); err != nil {
				errs = append(errs, err)
			}
			b = next
		}
	}
	for seg := range a.emptyRanges {
		a.visits++
		fs := seg.set
		if err := seg.exp.free(); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(a.emptyRanges, seg)
		fs.exps = slices.DeleteFunc(fs.exps, func(x *segment) bool { return x == seg })
		delete(fs.segs, seg)
		var d delta
		d.pool = poolIdx(fs.small)
		d.add(stSegment, -1)
		a.applyLocked(&d)
		a.dropIfEmptyLocked(fs)
	}
	return errors.Join(errs...)
}

// unmapFreeLocked unmaps the whole pages inside free block b, the last
// ones of them that cover at most bytes (rounded up to pages), leaving
// what stays mapped at its ends as smaller free blocks, and merges the new
// hole with neighbouring holes. It returns how many bytes it unmapped.
// a.mu held.
func (a *Allocator) unmapFreeLocked(fs *freeSet, b *block, bytes uint64) (uint64, error) {
	seg := b.seg
	off := uint64(b.ptr - seg.ptr)
	begin := a.roundPage(off)
	end := (off + b.size) / a.gran * a.gran
	if begin >= end || bytes == 0 {
		return 0, nil
	}
	if end-begin > bytes {
		// Only the top pages: the rest stays mapped, as one free block
		// before the hole, for the owner's next request.
		begin = end - a.roundPage(bytes)
	}
	n := end - begin
	unmapped, releaseErr := seg.exp.unmapPages(seg.ptr+driver.Ptr(begin), n)
	if !unmapped {
		return 0, releaseErr
	}
	fs.free.remove(b)
	if begin > off {
		pre := fs.newBlock()
		*pre = block{ptr: b.ptr, size: begin - off, seg: seg, set: seg.set, exp: true, freedAt: b.freedAt, hgen: pre.hgen}
		insertBefore(b, pre)
		fs.free.insert(pre)
	}
	if tail := off + b.size; tail > end {
		post := fs.newBlock()
		*post = block{ptr: seg.ptr + driver.Ptr(end), size: tail - end, seg: seg, set: seg.set, exp: true, freedAt: b.freedAt, hgen: post.hgen}
		insertAfter(b, post)
		fs.free.insert(post)
	}
	b.ptr, b.size, b.state = seg.ptr+driver.Ptr(begin), n, stateUnmapped
	for _, x := range [2]*block{b.prev, b.next} {
		if x != nil && x.state == stateUnmapped {
			seg.exp.removeHole(x)
			absorb(b, x)
			fs.recycle(x)
		}
	}
	seg.exp.addHole(b)
	a.setRangeEmptyLocked(seg, seg.exp.mapped == 0)
	a.unreserve(n)
	var d delta
	d.pool = poolIdx(fs.small)
	d.add(stReservedBytes, -int64(n))
	d.deviceFrees = int64(n / a.gran)
	a.applyLocked(&d)
	if a.hist != nil {
		a.hist.add(actSegmentUnmap, seg.ptr+driver.Ptr(begin), n, fs.stream.ID())
	}
	return n, releaseErr
}
