package devalloc

import (
	"math/bits"
	"slices"

	"github.com/accelkit/accelkit/driver"
)

// blockSet is the free set of one (stream, pool), ordered as PyTorch's
// std::set with BlockComparatorSize: by size, then address. The best fit
// for a request is the smallest block not below it, the lowest address
// among blocks of that size.
//
// Every block size is a multiple of kMinBlockSize, so sizes below
// 128 MiB fall into exact classes (size/512): a three-level bitmap over the
// classes finds the smallest non-empty class at or above a request in
// three word scans, and each class keeps its blocks in a min-heap by
// address with lazy deletion (classHeap), so best fit and insert are
// O(log k) in the blocks of one size (amortised; a hit's block returned
// is O(1)) and remove is O(1). The sorted-chunk slice this replaced moved
// ~1.5 KB per insert or remove and cost most of a cache hit's time. Blocks
// of 128 MiB and more (few: the large pool's own segments) sit in a sorted
// slice. Not safe for concurrent use: the owning freeSet's mutex guards
// it.
type blockSet struct {
	// pages and leaf come first: with freeSet.stream before them, the
	// hit's reads of its set share one line.
	//
	// leaf bit c: class c (blocks of size c<<classShift) may be non-empty;
	// set whenever it is, and cleared lazily, when a search finds the
	// class empty (classHeap.marked), so that a class emptied by a hit and
	// refilled by its free never writes the bitmaps. leaf and pages grow
	// on demand to the highest class used, so a small pool set (classes
	// below 4096) stays small.
	pages []*bucketPage
	leaf  []uint64
	n     int
	top   uint64   // bit i: mid[i] != 0
	big   []*block // sizes >= bucketedLimit, sorted by (size, ptr)
	// idx, when set, is the allocator's release index, which insert and
	// remove keep up to date (index.go) in the same calls, so that the hit
	// path pays no extra call for it; small is the set's pool.
	idx   *releaseIndex
	small bool
	// onPage counts this set's blocks on the release index's page list,
	// so that releasing other sets' pages can tell at once whether there
	// are any.
	onPage int
	// mid: bit j of mid[i]: leaf[i<<6|j] != 0. A slice grown with leaf,
	// not an array, so that a freeSet stays under 512 bytes, which Go's
	// allocator places without a header at a 64-byte boundary
	// (TestClassHeapLayout).
	mid []uint64
}

const (
	classShift = 9 // log2(kMinBlockSize)
	// numClasses: 64*64*64 classes, sizes below 128 MiB.
	numClasses    = 1 << 18
	bucketedLimit = numClasses << classShift
)

// bucketPage holds the heaps of 64 consecutive classes, one 64-byte line
// each (TestClassHeapLayout).
type bucketPage [64]classHeap

// classHeap is the blocks of one class: a min-heap by address with lazy
// deletion. Removing a block only invalidates its entry (block.hgen moves
// on) and counts it out of live; a stale entry is dropped when it comes to
// the root, or all at once when the stale ones outnumber the live. Entries
// carry the address inline and no block carries a position, so a sift
// compares and moves entries without touching a block (each a likely cache
// miss). A cache hit takes the class's root and, once freed and merged
// back, returns the same block at the same address: that entry, stale at
// the root, is revived where it is, and the pair costs no sift at all.
//
// The root entry is kept in the heap's own line (top), so that best fit
// reads the class's line and the block, not also the entries' array; top
// is the root's true value and h[0] is brought up to date (flush) before a
// sift reads it.
type classHeap struct {
	top    heapEntry // h[0], or zero while h is empty
	live   int32     // valid entries: the blocks placed in the class
	marked bool      // the class's leaf bit is set (blockSet.leaf)
	h      []heapEntry
	_      [8]byte // to 64 bytes: a class heap is one line
}

// heapEntry is a block's place in a class heap: valid while the block is
// placed in that class at that address under the same generation.
type heapEntry struct {
	ptr driver.Ptr
	b   *block
	gen uint32
}

// valid reports whether e still stands for its block, in class c. The
// generation decides it (and, being odd, says the block is placed);
// address and class are checked too, so that a generation that wrapped
// around can at worst revive a second entry for a block placed exactly
// there, which goes stale with the first.
func (e *heapEntry) valid(c uint64) bool {
	b := e.b
	return b.hgen == e.gen && b.hgen&1 == 1 && b.ptr == e.ptr && b.size>>classShift == c
}

func blockLess(x, y *block) bool {
	return x.size < y.size || x.size == y.size && x.ptr < y.ptr
}

// bucket returns class c's heap; the page must exist.
func (s *blockSet) bucket(c uint64) *classHeap {
	return &s.pages[c>>6][c&63]
}

// root returns the lowest-address block of class c, which holds at least
// one: stale entries at the root are dropped first.
func (s *blockSet) root(c uint64) *block {
	ch := s.bucket(c)
	for !ch.top.valid(c) {
		ch.pop()
	}
	return ch.top.b
}

// pop drops the root entry.
func (ch *classHeap) pop() {
	last := len(ch.h) - 1
	ch.h[0] = ch.h[last]
	ch.h[last] = heapEntry{}
	ch.h = ch.h[:last]
	if last > 0 {
		heapDown(ch.h, 0)
	}
	ch.setTop()
}

// setTop copies the root entry, after a sift, into top.
func (ch *classHeap) setTop() {
	if len(ch.h) > 0 {
		ch.top = ch.h[0]
	} else {
		ch.top = heapEntry{}
	}
}

// flush brings h[0] up to top, which a revive changes alone, before the
// entries are sifted or scanned.
func (ch *classHeap) flush() {
	if len(ch.h) > 0 {
		ch.h[0] = ch.top
	}
}

// best returns the best fit for size: the smallest block of at least size
// bytes, the lowest address among equals; nil when none is large enough.
func (s *blockSet) best(size uint64) *block {
	b, _ := s.fit(size)
	return b
}

// fit is best that also returns the class heap the block is in (nil for
// the sorted slice), for take: the hit path finds the heap once. The
// common case, a block of exactly the size asked for (nine hits in ten
// in BenchmarkHitPair), reads the class's heap and its root block and no
// bitmap.
func (s *blockSet) fit(size uint64) (*block, *classHeap) {
	if size < bucketedLimit {
		c := size >> classShift
		if w := c >> 6; w < uint64(len(s.pages)) {
			if pg := s.pages[w]; pg != nil {
				if ch := &pg[c&63]; ch.live > 0 {
					for !ch.top.valid(c) {
						ch.pop()
					}
					return ch.top.b, ch
				}
			}
		}
		if c, ok := s.liveClassAtLeast(c); ok {
			ch := s.bucket(c)
			for !ch.top.valid(c) {
				ch.pop()
			}
			return ch.top.b, ch
		}
	}
	if len(s.big) == 0 {
		return nil, nil
	}
	i, _ := slices.BinarySearchFunc(s.big, size, func(b *block, size uint64) int {
		if b.size < size {
			return -1
		}
		return 1
	})
	if i < len(s.big) {
		return s.big[i], nil
	}
	return nil, nil
}

// liveClassAtLeast returns the smallest non-empty class >= c, clearing
// the leaf bits of the empty classes it passes.
func (s *blockSet) liveClassAtLeast(c uint64) (uint64, bool) {
	for {
		m, ok := s.classAtLeast(c)
		if !ok {
			return 0, false
		}
		ch := s.bucket(m)
		if ch.live > 0 {
			return m, true
		}
		s.unmark(ch, m)
		c = m + 1
	}
}

// unmark clears the leaf bit of class c, whose heap ch is empty.
func (s *blockSet) unmark(ch *classHeap, c uint64) {
	ch.marked = false
	w := c >> 6
	s.leaf[w] &^= 1 << (c & 63)
	if s.leaf[w] == 0 {
		s.mid[w>>6] &^= 1 << (w & 63)
		if s.mid[w>>6] == 0 {
			s.top &^= 1 << (w >> 6)
		}
	}
}

// classAtLeast returns the smallest class >= c whose leaf bit is set.
func (s *blockSet) classAtLeast(c uint64) (uint64, bool) {
	w := c >> 6
	if w < uint64(len(s.leaf)) {
		if m := s.leaf[w] >> (c & 63); m != 0 {
			return c + uint64(bits.TrailingZeros64(m)), true
		}
	}
	// The next non-empty leaf word after w: first within w's mid word,
	// then in a later mid word.
	w++
	mi := w >> 6
	if mi < uint64(len(s.mid)) && w&63 != 0 {
		if m := s.mid[mi] >> (w & 63); m != 0 {
			lw := w + uint64(bits.TrailingZeros64(m))
			return lw<<6 | uint64(bits.TrailingZeros64(s.leaf[lw])), true
		}
		mi++
	}
	if mi >= 64 {
		return 0, false
	}
	t := s.top >> mi
	if t == 0 {
		return 0, false
	}
	mi += uint64(bits.TrailingZeros64(t))
	lw := mi<<6 | uint64(bits.TrailingZeros64(s.mid[mi]))
	return lw<<6 | uint64(bits.TrailingZeros64(s.leaf[lw])), true
}

// largest returns a block of the largest size, or nil.
func (s *blockSet) largest() *block {
	if n := len(s.big); n > 0 {
		return s.big[n-1]
	}
	for s.top != 0 {
		mi := uint64(63 - bits.LeadingZeros64(s.top))
		lw := mi<<6 | uint64(63-bits.LeadingZeros64(s.mid[mi]))
		c := lw<<6 | uint64(63-bits.LeadingZeros64(s.leaf[lw]))
		ch := s.bucket(c)
		if ch.live > 0 {
			return s.root(c)
		}
		s.unmark(ch, c)
	}
	return nil
}

// count returns how many blocks of exactly size bytes the set holds.
func (s *blockSet) count(size uint64) int {
	if size >= bucketedLimit {
		n := 0
		for _, b := range s.big {
			if b.size == size {
				n++
			}
		}
		return n
	}
	c := size >> classShift
	if w := c >> 6; w >= uint64(len(s.pages)) || s.pages[w] == nil {
		return 0
	}
	return int(s.bucket(c).live)
}

func (s *blockSet) insert(b *block) {
	s.n++
	if x := s.idx; x != nil {
		x.max[boolBit(s.small)].added(b.size)
		if !b.exp {
			if b.prev == nil && b.next == nil {
				x.whole[boolBit(s.small)].push(b, listWhole)
			}
		} else if x.holdsPage(b) {
			x.page[boolBit(s.small)].push(b, listPage)
			s.onPage++
		}
	}
	// Placed in its class heap, or in the sorted slice; in one function
	// with the index upkeep, as a hit returns a block here.
	c := b.size >> classShift
	w := c >> 6
	var pg *bucketPage
	if w < uint64(len(s.pages)) {
		pg = s.pages[w]
	}
	if pg == nil {
		if b.size >= bucketedLimit {
			s.placeBig(b)
			return
		}
		pg = s.newPage(w)
	}
	ch := &pg[c&63]
	if !ch.marked {
		ch.marked = true
		s.leaf[w] |= 1 << (c & 63)
		s.mid[w>>6] |= 1 << (w & 63)
		s.top |= 1 << (w >> 6)
	}
	ch.live++
	b.hgen++ // odd: placed
	if ch.top.b == b && ch.top.ptr == b.ptr {
		// b comes back where it was taken from: its stale entry is the
		// root, and the heap order holds with it revived.
		ch.top.gen = b.hgen
		return
	}
	ch.push(c, b)
}

// revive is insert for the common return: b, of a plain segment and not
// alone in it (so on no release list), goes back to the class heap it was
// taken from whole, whose root entry still names it at its address. It
// revives that entry as insert's in-place case does, without insert's
// release-list and page tests, and reports whether it did; when false it
// has changed nothing.
func (s *blockSet) revive(b *block) bool {
	c := b.size >> classShift
	w := c >> 6
	if b.exp || b.prev == nil && b.next == nil || w >= uint64(len(s.pages)) || s.pages[w] == nil {
		return false
	}
	ch := &s.pages[w][c&63]
	if ch.top.b != b || ch.top.ptr != b.ptr || !ch.marked {
		return false
	}
	s.n++
	if x := s.idx; x != nil {
		x.max[boolBit(s.small)].added(b.size)
	}
	ch.live++
	b.hgen++ // odd: placed
	ch.top.gen = b.hgen
	return true
}

// newPage makes the bucket page of leaf word w, growing leaf and pages to
// it.
func (s *blockSet) newPage(w uint64) *bucketPage {
	if w >= uint64(len(s.leaf)) {
		s.leaf = append(s.leaf, make([]uint64, w+1-uint64(len(s.leaf)))...)
		s.pages = append(s.pages, make([]*bucketPage, w+1-uint64(len(s.pages)))...)
		if n := w>>6 + 1; n > uint64(len(s.mid)) {
			s.mid = append(s.mid, make([]uint64, n-uint64(len(s.mid)))...)
		}
	}
	pg := new(bucketPage)
	s.pages[w] = pg
	return pg
}

// placeBig puts b, of at least bucketedLimit bytes, in the sorted slice.
func (s *blockSet) placeBig(b *block) {
	i, _ := slices.BinarySearchFunc(s.big, b, func(x, b *block) int {
		if blockLess(x, b) {
			return -1
		}
		return 1
	})
	s.big = slices.Insert(s.big, i, b)
}

// push adds b's entry to ch, of class c, which b was just placed in.
func (ch *classHeap) push(c uint64, b *block) {
	ch.flush()
	if len(ch.h) >= 2*int(ch.live)+8 {
		ch.compact(c)
	}
	ch.h = append(ch.h, heapEntry{b.ptr, b, b.hgen})
	heapUp(ch.h, len(ch.h)-1)
	ch.setTop()
}

// compact drops every stale entry and restores the heap order; h[0] must
// be flushed.
func (ch *classHeap) compact(c uint64) {
	h := ch.h[:0]
	for _, e := range ch.h {
		if e.valid(c) {
			h = append(h, e)
		}
	}
	clear(ch.h[len(h):])
	ch.h = h
	for i := len(h)/2 - 1; i >= 0; i-- {
		heapDown(h, i)
	}
}

// remove deletes b, which must be in the set with the size it was inserted
// with; it reports whether b was found.
func (s *blockSet) remove(b *block) bool {
	if b.size >= bucketedLimit {
		i, found := slices.BinarySearchFunc(s.big, b, func(x, b *block) int {
			if blockLess(x, b) {
				return -1
			}
			if x == b {
				return 0
			}
			return 1
		})
		if !found {
			return false
		}
		s.big = slices.Delete(s.big, i, i+1)
		s.unindex(b)
		return true
	}
	c := b.size >> classShift
	w := c >> 6
	if b.hgen&1 == 0 || w >= uint64(len(s.pages)) || s.pages[w] == nil {
		return false
	}
	ch := &s.pages[w][c&63]
	if ch.live == 0 {
		return false
	}
	s.take(b, ch)
	return true
}

// take removes b from the set: b is placed in class heap ch (fit returned
// them together). Its entry goes stale; it leaves the heap at the root,
// or with the rest at the next compact. With ch nil, b is in the sorted
// slice.
func (s *blockSet) take(b *block, ch *classHeap) {
	if ch == nil {
		s.remove(b)
		return
	}
	b.hgen++ // even: not placed
	ch.taken()
	// unindex, written out for the hit path.
	s.n--
	if x := s.idx; x != nil {
		x.max[boolBit(s.small)].removed(b.size)
		if b.rlist != listNone {
			s.unlist(x, b)
		}
	}
}

// taken counts out of ch a block whose entry just went stale.
func (ch *classHeap) taken() {
	if ch.live--; ch.live == 0 && len(ch.h) > 1 {
		// Empty: no entry is valid. A lone entry stays, for insert to
		// revive when the block taken comes back; the leaf bit stays too
		// (blockSet.leaf).
		clear(ch.h)
		ch.h = ch.h[:0]
		ch.top = heapEntry{}
	}
}

// unindex counts b, just taken out of the set, out of the set and the
// release index.
func (s *blockSet) unindex(b *block) {
	s.n--
	if x := s.idx; x != nil {
		x.max[boolBit(s.small)].removed(b.size)
		if b.rlist != listNone {
			s.unlist(x, b)
		}
	}
}

// unlist takes b off the release list it is on.
func (s *blockSet) unlist(x *releaseIndex, b *block) {
	switch b.rlist {
	case listWhole:
		x.whole[boolBit(s.small)].remove(b)
	case listPage:
		x.page[boolBit(s.small)].remove(b)
		s.onPage--
	}
}

// heapUp and heapDown keep h a min-heap by address.
func heapUp(h []heapEntry, i int) {
	e := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].ptr <= e.ptr {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

func heapDown(h []heapEntry, i int) {
	e := h[i]
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].ptr < h[l].ptr {
			m = r
		}
		if e.ptr <= h[m].ptr {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = e
}
