package devalloc

// Growth and limits: creating a plain segment when no cached block fits,
// and the reserved-bytes accounting that SetLimit and SetMemoryFraction
// cap. (Expandable segments grow in expandable.go.)

import (
	"fmt"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

// growLocked creates a plain segment for the request and commits a block
// from it. a.mu held, but released around the driver call: nothing refers
// to the new segment until it is published below, a concurrent miss on
// the same set at worst grows the cache by one more segment, and the pin
// keeps a release from dropping fs meanwhile.
func (a *Allocator) growLocked(fs *freeSet, rsize, size uint64, s driver.Stream) (*block, error) {
	segSize := allocationSize(rsize)
	fs.pins++
	a.mu.Unlock()
	p, err := a.deviceMalloc(segSize)
	a.mu.Lock()
	fs.pins--
	if err != nil {
		return nil, err
	}
	seg := &segment{ptr: p, size: segSize, set: fs}
	b := &block{ptr: p, size: segSize, seg: seg, set: fs, freedAt: a.rel.nextFreed()}
	seg.head, seg.tail = b, b
	fs.segs[seg] = struct{}{}
	var d delta
	d.pool = poolIdx(fs.small)
	d.add(stSegment, 1)
	d.add(stReservedBytes, int64(segSize))
	if a.maxSplit != 0 && segSize >= a.maxSplit {
		d.oversizeSeg = 1
	}
	d.deviceAllocs = 1
	a.applyLocked(&d)
	if a.hist != nil {
		a.hist.add(actSegmentAlloc, p, segSize, fs.stream.ID())
	}
	a.commitLocked(fs, b, rsize, size, s, evpool.SameStream(s, fs.stream))
	return b, nil
}

// reserve counts n bytes against the limit; false if they do not fit.
func (a *Allocator) reserve(n uint64) bool {
	for {
		cur := a.reserved.Load()
		if l := a.limit.Load(); l != 0 && cur+n > l {
			return false
		}
		if a.reserved.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (a *Allocator) unreserve(n uint64) { a.reserved.Add(-n) }

func (a *Allocator) deviceMalloc(n uint64) (driver.Ptr, error) {
	if !a.reserve(n) {
		return 0, fmt.Errorf("%w: %w", errLimit, driver.ErrOutOfMemory)
	}
	p, err := a.dev.Malloc(n)
	if err != nil {
		a.unreserve(n)
		return 0, err
	}
	a.raiseHighWater()
	return p, nil
}

// raiseHighWater records a new high-water mark of reserved memory after a
// grow succeeded.
func (a *Allocator) raiseHighWater() {
	r := a.reserved.Load()
	for {
		hw := a.highWater.Load()
		if r <= hw || a.highWater.CompareAndSwap(hw, r) {
			return
		}
	}
}

// releaseTarget is how many bytes release-before-growing unmaps, with
// expandable segments, before mapping need bytes: the part of the mapping
// that would take reserved memory past its high-water mark, and nothing
// when it stays under it. Unmapping below the mark would not lower the
// peak, only make the driver map again later what it unmaps now. Plain
// segments do not use it: there a whole segment released under the mark
// is cut anew for the sizes of later steps, which lowers their peaks
// (the shapes trace: 1.025x allocated with the release, 1.035x with only
// what passes the mark).
func (a *Allocator) releaseTarget(need uint64) uint64 {
	r, hw := a.reserved.Load(), a.highWater.Load()
	if r+need <= hw {
		return 0
	}
	return min(need, r+need-hw)
}
