package devalloc

// Indexes over every free set, so that no path scans all streams or all
// segments per allocation.
//
// A free set exists only while its (stream, pool) holds a segment (or a
// grow into it is in flight): it is created on the first miss that grows
// it and dropped when its last segment is released. The allocator's state
// therefore follows the streams that hold memory, not every stream ever
// seen; a program that cycles through 100k streams keeps as many sets as
// it has streams with memory.
//
// What the release paths want is kept in releaseIndex as blocks enter and
// leave the free sets (blockSet.insert and remove keep it, each O(1)):
//   - whole: per pool, free plain segments (one free block, no
//     neighbours), in the order they became free. A block's freedAt is a
//     sequence number taken under mu when it was freed, so each list is in
//     freedAt order, and the oldest of both pools is the head with the
//     lower freedAt: garbage collection and the OOM path release from the
//     heads, oldest first; release-before-growing from the large pool's.
//   - page: per pool, free blocks of expandable ranges that hold at least
//     one whole page, in the order they became free, which EmptyCache and
//     the OOM path unmap, and release-before-growing in other streams'
//     ranges of the large pool.
//   - max: per pool, the largest free block size and how many free blocks
//     have it, for the OOM message, Stats and cross-stream reuse. The hit
//     path updates it with a compare; only when every block of the
//     largest size has gone (and the value is asked for) are the sets
//     rescanned.
//
// A free block's size, neighbours and address change only while it is out
// of its free set (merges and splits remove it first), so membership is
// decided when it is inserted and undone when it is removed.
// Allocator.emptyRanges, the expandable ranges with nothing mapped, which
// a release returns, is kept where ranges are mapped and unmapped.
// Everything here is guarded by Allocator.mu.

import "github.com/accelkit/accelkit/driver"

// Which list a free block is on (block.rlist).
const (
	listNone uint8 = iota
	listWhole
	listPage
)

// blockList is an intrusive doubly linked list of blocks through
// block.rprev and block.rnext.
type blockList struct {
	head, tail *block
	n          int
}

func (l *blockList) push(b *block, which uint8) {
	b.rlist = which
	b.rprev, b.rnext = l.tail, nil
	if l.tail != nil {
		l.tail.rnext = b
	} else {
		l.head = b
	}
	l.tail = b
	l.n++
}

func (l *blockList) remove(b *block) {
	if b.rprev != nil {
		b.rprev.rnext = b.rnext
	} else {
		l.head = b.rnext
	}
	if b.rnext != nil {
		b.rnext.rprev = b.rprev
	} else {
		l.tail = b.rprev
	}
	b.rprev, b.rnext, b.rlist = nil, nil, listNone
	l.n--
}

// freeMax tracks the largest free block size of one pool. When stale, size
// and n mean nothing until the next recompute.
type freeMax struct {
	size  uint64
	n     int // free blocks of that size
	stale bool
}

func (m *freeMax) added(size uint64) {
	switch {
	case m.stale:
	case size > m.size:
		m.size, m.n = size, 1
	case size == m.size:
		m.n++
	}
}

func (m *freeMax) removed(size uint64) {
	if !m.stale && size == m.size {
		if m.n--; m.n == 0 {
			m.stale = true
		}
	}
}

// releaseIndex is what the release paths and the largest-free queries
// read instead of scanning the sets. Every free set's blockSet points at
// the allocator's one and keeps it current as blocks come and go.
type releaseIndex struct {
	whole [2]blockList // by boolBit(small): free whole plain segments, oldest freed first
	page  [2]blockList // by boolBit(small): free expandable blocks holding a whole page, oldest first
	max   [2]freeMax   // by boolBit(small)
	gran  uint64       // the VMM page (expandable segments), else 0
	// freed numbers the frees (freedAt), so that the whole lists of the
	// two pools merge in the order their blocks were freed.
	freed uint64
}

// nextFreed returns the freedAt of a block being freed now. a.mu held.
func (x *releaseIndex) nextFreed() uint64 {
	x.freed++
	return x.freed
}

// holdsPage reports whether block b of an expandable range covers at least
// one whole page, which unmapFreeLocked would release.
func (x *releaseIndex) holdsPage(b *block) bool {
	off := uint64(b.ptr - b.seg.ptr)
	return (off+x.gran-1)/x.gran*x.gran+x.gran <= off+b.size
}

// largestFreeLocked returns the largest cached free block of the small
// (small true) or large pool, rescanning the sets when the index lost
// track. a.mu held.
func (a *Allocator) largestFreeLocked(small bool) uint64 {
	m := &a.rel.max[boolBit(small)]
	if m.stale {
		*m = freeMax{}
		for fs := a.setHead; fs != nil; fs = fs.nextSet {
			a.visits++
			if fs.small != small {
				continue
			}
			b := fs.free.largest()
			switch {
			case b == nil || b.size < m.size:
			case b.size > m.size:
				m.size, m.n = b.size, fs.free.count(b.size)
			default:
				m.n += fs.free.count(b.size)
			}
		}
	}
	return m.size
}

// lookupLocked returns the free set of (stream id, pool), or nil. a.mu
// held.
func (a *Allocator) lookupLocked(id uint64, small bool) *freeSet {
	if id < denseStreams {
		if i := int(id<<1 | uint64(boolBit(small))); i < len(a.dense) {
			return a.dense[i]
		}
		return nil
	}
	return a.sparse[setKey{id, small}]
}

// createSetLocked makes the free set of (s, pool), which must not exist,
// and appends it to the set list. a.mu held.
func (a *Allocator) createSetLocked(s driver.Stream, id uint64, small bool) *freeSet {
	fs := &freeSet{stream: s, id: id, small: small, segs: map[*segment]struct{}{}}
	fs.free.idx, fs.free.small = &a.rel, small
	if id < denseStreams {
		i := int(id<<1 | uint64(boolBit(small)))
		if i >= len(a.dense) {
			a.dense = append(a.dense, make([]*freeSet, i+1-len(a.dense))...)
		}
		a.dense[i] = fs
	} else {
		if a.sparse == nil {
			a.sparse = map[setKey]*freeSet{}
		}
		a.sparse[setKey{id, small}] = fs
	}
	fs.prevSet = a.setTail
	if a.setTail != nil {
		a.setTail.nextSet = fs
	} else {
		a.setHead = fs
	}
	a.setTail = fs
	a.numSets++
	return fs
}

// dropIfEmptyLocked forgets fs when it holds no segment and no grow into
// it is in flight: a stream that holds no memory costs nothing. A later
// miss on the stream creates a new set. a.mu held.
func (a *Allocator) dropIfEmptyLocked(fs *freeSet) {
	if len(fs.segs) > 0 || fs.pins > 0 || fs.dropped {
		return
	}
	fs.dropped = true
	if fs.id < denseStreams {
		a.dense[fs.id<<1|uint64(boolBit(fs.small))] = nil
	} else {
		delete(a.sparse, setKey{fs.id, fs.small})
	}
	if fs.prevSet != nil {
		fs.prevSet.nextSet = fs.nextSet
	} else {
		a.setHead = fs.nextSet
	}
	if fs.nextSet != nil {
		fs.nextSet.prevSet = fs.prevSet
	} else {
		a.setTail = fs.prevSet
	}
	fs.prevSet, fs.nextSet = nil, nil
	a.numSets--
}

// denseStreams: streams with IDs below it find their free sets by index
// in Allocator.dense rather than by hashing; others use Allocator.sparse.
const denseStreams = 1024

func boolBit(b bool) uint {
	if b {
		return 1
	}
	return 0
}
