package devalloc

// Expandable segments. On a driver.VMM device each (stream, pool) owns one
// reserved virtual range; memory is mapped into it page by page
// (Granularity, 2 MiB on CUDA and sim) at its end. A miss maps just enough
// pages for the request (less the free tail it can merge with), creating
// one physical allocation per page but granting access with one SetAccess
// over the whole grown range: on an H100, SetAccess is ~46 us per call
// against ~13 us for MemCreate and ~1 us for MemMap per page, so one call
// per growth instead of one per page is what keeps growth cheap.
//
// Release (EmptyCache and the OOM path) unmaps the free whole pages at the
// end of the range; the range itself is returned when nothing is mapped.
// Free pages between live blocks stay mapped (see README: not done).

import (
	"errors"
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

type expandable struct {
	va      uint64             // reserved bytes
	handles []driver.MemHandle // one per mapped page, in address order
}

// vaSize is the virtual range reserved per (stream, pool): the device
// total rounded up to the granularity, since no range can map more.
func (a *Allocator) vaSize() uint64 {
	return (a.total + a.gran - 1) / a.gran * a.gran
}

func (a *Allocator) growExpandableLocked(fs *freeSet, rsize, size uint64, s driver.Stream) (*block, error) {
	seg := fs.exp
	if seg == nil {
		va := a.vaSize()
		base, err := a.vmm.AddressReserve(va, 0)
		if err != nil {
			return nil, fmt.Errorf("devalloc: reserve %s of address space: %w", formatBytes(va), err)
		}
		seg = &segment{ptr: base, set: fs, exp: &expandable{va: va}}
		fs.exp = seg
		fs.segs[seg] = struct{}{}
		var d delta
		d.pool = poolIdx(fs.small)
		d.add(stSegment, 1)
		a.apply(&d)
	}
	tail := seg.tail
	var have uint64
	if tail != nil && tail.state == stateFree {
		have = tail.size
	}
	if have >= rsize {
		// The free tail fits but the oversize rules kept takeLocked from
		// it: hand it out rather than map more.
		fs.free.remove(tail)
		a.commitLocked(fs, tail, rsize, size, s)
		return tail, nil
	}
	need := (rsize - have + a.gran - 1) / a.gran * a.gran
	if seg.size+need > seg.exp.va {
		return nil, fmt.Errorf("devalloc: expandable range of stream %d is full (%s mapped of %s): %w",
			fs.stream.ID(), formatBytes(seg.size), formatBytes(seg.exp.va), driver.ErrOutOfMemory)
	}
	if !a.reserve(need) {
		return nil, fmt.Errorf("%w: %w", errLimit, driver.ErrOutOfMemory)
	}
	at := seg.ptr + driver.Ptr(seg.size)
	pages := int(need / a.gran)
	handles := make([]driver.MemHandle, 0, pages)
	undo := func(err error) (*block, error) {
		if len(handles) > 0 {
			// Unmap what was mapped (errors here leave nothing better to do).
			a.vmm.MemUnmap(at, uint64(len(handles))*a.gran)
		}
		for _, h := range handles {
			a.vmm.MemRelease(h)
		}
		a.unreserve(need)
		return nil, err
	}
	for i := 0; i < pages; i++ {
		h, err := a.vmm.MemCreate(a.gran)
		if err != nil {
			return undo(err)
		}
		if err := a.vmm.MemMap(at+driver.Ptr(uint64(i)*a.gran), a.gran, 0, h); err != nil {
			a.vmm.MemRelease(h)
			return undo(err)
		}
		handles = append(handles, h)
	}
	if err := a.vmm.SetAccess(at, need); err != nil {
		return undo(err)
	}
	seg.exp.handles = append(seg.exp.handles, handles...)
	seg.size += need
	var d delta
	d.pool = poolIdx(fs.small)
	d.add(stReservedBytes, int64(need))
	d.deviceAllocs = int64(pages)
	a.apply(&d)
	if a.hist != nil {
		a.hist.add(actSegmentMap, at, need, fs.stream.ID())
	}
	var b *block
	if have > 0 {
		fs.free.remove(tail)
		tail.size += need
		b = tail
	} else {
		b = &block{ptr: at, size: need, seg: seg, prev: tail, freedAt: a.clock.Load()}
		if tail != nil {
			tail.next = b
		} else {
			seg.head = b
		}
		seg.tail = b
	}
	a.commitLocked(fs, b, rsize, size, s)
	return b, nil
}

// shrinkExpandableLocked unmaps the free whole pages at the end of fs's
// range, and returns the range when nothing stays mapped. a.mu held.
func (a *Allocator) shrinkExpandableLocked(fs *freeSet) error {
	seg := fs.exp
	tail := seg.tail
	if tail != nil && tail.state != stateFree {
		return nil
	}
	start := seg.size // first byte to unmap, relative to the range
	if tail != nil {
		off := uint64(tail.ptr - seg.ptr)
		start = (off + a.gran - 1) / a.gran * a.gran
	}
	if start < seg.size {
		n := seg.size - start
		if err := a.vmm.MemUnmap(seg.ptr+driver.Ptr(start), n); err != nil {
			return fmt.Errorf("devalloc: unmap %s of expandable range: %w", formatBytes(n), err)
		}
		var errs []error
		first := int(start / a.gran)
		for _, h := range seg.exp.handles[first:] {
			if err := a.vmm.MemRelease(h); err != nil {
				errs = append(errs, err)
			}
		}
		clear(seg.exp.handles[first:])
		seg.exp.handles = seg.exp.handles[:first]
		fs.free.remove(tail)
		if off := uint64(tail.ptr - seg.ptr); off == start {
			seg.tail = tail.prev
			if tail.prev != nil {
				tail.prev.next = nil
			} else {
				seg.head = nil
			}
		} else {
			tail.size = start - off
			fs.free.insert(tail)
		}
		seg.size = start
		a.unreserve(n)
		var d delta
		d.pool = poolIdx(fs.small)
		d.add(stReservedBytes, -int64(n))
		d.deviceFrees = int64(n / a.gran)
		a.apply(&d)
		if a.hist != nil {
			a.hist.add(actSegmentUnmap, seg.ptr+driver.Ptr(start), n, fs.stream.ID())
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	if seg.size == 0 {
		if err := a.vmm.AddressFree(seg.ptr, seg.exp.va); err != nil {
			return fmt.Errorf("devalloc: free expandable address range: %w", err)
		}
		fs.exp = nil
		delete(fs.segs, seg)
		var d delta
		d.pool = poolIdx(fs.small)
		d.add(stSegment, -1)
		a.apply(&d)
	}
	return nil
}

// unmapAllLocked tears down an expandable range whatever its blocks (Close).
func (a *Allocator) unmapAllLocked(fs *freeSet, seg *segment) error {
	var errs []error
	if seg.size > 0 {
		if err := a.vmm.MemUnmap(seg.ptr, seg.size); err != nil {
			errs = append(errs, err)
		}
		for _, h := range seg.exp.handles {
			if err := a.vmm.MemRelease(h); err != nil {
				errs = append(errs, err)
			}
		}
		a.unreserve(seg.size)
	}
	if err := a.vmm.AddressFree(seg.ptr, seg.exp.va); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
