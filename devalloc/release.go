package devalloc

// Release: EmptyCache, the OOM path's release and garbage collection give
// cached memory back to the device, taking what the release indexes
// (index.go) list, so each costs what it releases.

import (
	"errors"
	"fmt"
	"math"
)

// releaseAll completes pending frees and releases every cached whole
// plain segment and every free whole page of the expandable ranges, from
// the release indexes (index.go): it costs what it releases.
func (a *Allocator) releaseAll() error {
	a.count(func(c *counters) { c.numSyncAllStreams++ })
	var errs []error
	if err := a.def.Drain(); err != nil {
		errs = append(errs, err)
	}
	a.mu.Lock()
	victims := a.takeWholeLocked(math.MaxUint64, true)
	if a.vmm != nil {
		errs = append(errs, a.shrinkLocked())
	}
	a.mu.Unlock()
	errs = append(errs, a.freeSegments(victims))
	return errors.Join(errs...)
}

// takeWholeLocked takes cached whole plain segments out of the cache,
// oldest freed first, of the large pool and, when small is true, of the
// small pool too, until they add up to target bytes or none is left, and
// returns their blocks for freeSegments. Once out of the free sets no one
// can take them. a.mu held.
func (a *Allocator) takeWholeLocked(target uint64, small bool) []*block {
	var victims []*block
	var freed uint64
	large, smalls := &a.rel.whole[0], &a.rel.whole[1]
	for freed < target {
		b := large.head
		if s := smalls.head; small && s != nil && (b == nil || s.freedAt < b.freedAt) {
			b = s
		}
		if b == nil {
			break
		}
		a.visits++
		fs := b.set
		fs.free.remove(b)
		delete(fs.segs, b.seg)
		pool := poolIdx(fs.small)
		a.st.dec(stSegment, pool, 1)
		a.st.dec(stReservedBytes, pool, int64(b.size))
		if a.oversize(b) { // b is a whole plain segment
			a.st.oversizeSegments.add(-1)
		}
		victims = append(victims, b)
		freed += b.size
		a.dropIfEmptyLocked(fs)
	}
	return victims
}

// freeSegments gives segments taken by takeWholeLocked back to the device.
//
// A block freed on its own stream is reusable at once, but work queued on
// that stream may still touch it: each stream is synchronised before its
// memory goes back to the device (cudaFree synchronises likewise). A
// failed stream's work will never run, so its error is no reason to keep
// the memory.
func (a *Allocator) freeSegments(victims []*block) error {
	if len(victims) == 0 {
		return nil
	}
	synced := make(map[*freeSet]bool)
	for _, b := range victims {
		if fs := b.set; !synced[fs] {
			synced[fs] = true
			_ = fs.stream.Synchronize() // a failed stream's error changes nothing here
		}
	}
	var errs []error
	for _, b := range victims {
		if e := a.dev.Free(b.ptr); e != nil {
			errs = append(errs, fmt.Errorf("devalloc: release segment %v: %w", b.ptr, e))
		}
		a.unreserve(b.size)
		a.rec.add(actSegmentFree, b.ptr, b.size, b.set.id) // without mu: through rec (history.go)
	}
	a.count(func(c *counters) { c.numDeviceFree += int64(len(victims)) })
	return errors.Join(errs...)
}

// garbageCollect releases cached whole segments, oldest freed first, until
// reserving need more bytes stays under the GC threshold of the limit.
func (a *Allocator) garbageCollect(need uint64) {
	limit := a.limit.Load()
	if limit == 0 {
		limit = a.total
	}
	threshold := uint64(a.cfg.GarbageCollectionThreshold * float64(limit))
	reserved := a.reserved.Load()
	if reserved+need <= threshold {
		return
	}
	a.mu.Lock()
	victims := a.takeWholeLocked(reserved+need-threshold, true)
	a.mu.Unlock()
	// The segments are out of the cache either way; a driver error on
	// their Free is no reason to fail the allocation that collected them.
	_ = a.freeSegments(victims)
	if len(victims) > 0 {
		a.count(func(c *counters) { c.numGCReleases++ })
	}
}

// releaseBeforeGrow runs before a miss reserves a new plain segment of
// need bytes: it releases cached whole segments of the large pool, of any
// stream, oldest freed first, until they cover need, so that reserved
// memory does not grow while the cache holds segments no request fits.
// PyTorch keeps them until an allocation fails; by then the peak is
// reached. Only whole free segments qualify: a block still in use, or
// pending free because RecordStream noted a stream whose work is not done,
// keeps its segment cached. freeSegments synchronises each owner stream
// before its memory goes back, as cudaFree would.
func (a *Allocator) releaseBeforeGrow(need uint64) {
	a.mu.Lock()
	victims := a.takeWholeLocked(need, false)
	a.mu.Unlock()
	if len(victims) == 0 {
		return
	}
	// As in garbageCollect: the segments are out of the cache either way.
	_ = a.freeSegments(victims)
	a.count(func(c *counters) { c.numGrowReleases += int64(len(victims)) })
}
