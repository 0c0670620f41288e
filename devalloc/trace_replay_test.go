package devalloc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// replaySeg is one segment of the replay's memory: [addr, addr+size) on
// a stream.
type replaySeg struct {
	addr, size, stream uint64
}

func (s replaySeg) end() uint64 { return s.addr + s.size }

// replayTrace checks that a snapshot's trace agrees with its segments the
// way PyTorch's viewer relies on: MemoryViz.js's segment view starts from
// the snapshot's segments and live blocks and undoes the trace from its
// newest entry back to the selected one (simulate_memory). Undoing a
// segment_map cuts the mapped range out of the one segment that holds it
// (and throws when none does), undoing a segment_unmap puts the range
// back and merges it with adjacent segments of the same stream; undoing a
// segment_alloc removes the segment at that address, a segment_free puts
// it back; undoing a free_completed puts the block back, an alloc removes
// it; and at every event index every live block must lie in a segment
// (the view looks each one up). The replay checks more than the viewer
// needs: a segment comes back only on memory no segment holds, a
// segment_alloc's segment exists with its size, a range cut out holds no
// live block, and a block freed or allocated is the block the replay has
// there. It returns the problems, at most 20.
func replayTrace(snap *memsnap.Snapshot, dev int) []string {
	var probs []string
	report := func(format string, args ...any) {
		if len(probs) < 20 {
			probs = append(probs, fmt.Sprintf(format, args...))
		}
	}
	var segs []replaySeg // by address
	blocks := map[uint64]uint64{}
	for _, s := range snap.Segments {
		if s.Device != dev {
			continue
		}
		segs = append(segs, replaySeg{s.Address, s.TotalSize, s.Stream})
		for _, b := range s.Blocks {
			if b.State == memsnap.StateActiveAllocated || b.State == memsnap.StateActivePendingFree {
				blocks[b.Address] = b.RequestedSize
			}
		}
	}
	slices.SortFunc(segs, func(x, y replaySeg) int { return cmpU64(x.addr, y.addr) })
	// holding returns the index of the segment that holds [addr, addr+n), or -1.
	holding := func(addr, n uint64) int {
		i, _ := slices.BinarySearchFunc(segs, addr+1, func(s replaySeg, a uint64) int { return cmpU64(s.addr, a) })
		if i > 0 && segs[i-1].addr <= addr && addr+n <= segs[i-1].end() {
			return i - 1
		}
		return -1
	}
	overlaps := func(addr, n uint64) bool {
		for _, s := range segs {
			if s.addr < addr+n && addr < s.end() {
				return true
			}
		}
		return false
	}
	liveIn := func(addr, n uint64) (uint64, bool) {
		for b, sz := range blocks {
			if b < addr+n && addr < b+max(sz, 1) {
				return b, true
			}
		}
		return 0, false
	}
	tr := snap.DeviceTraces[dev]
	for i := len(tr) - 1; i >= 0; i-- {
		e := tr[i]
		switch e.Action {
		case memsnap.ActionAlloc:
			if _, ok := blocks[e.Addr]; !ok {
				report("event %d: alloc at %#x: no live block there after it", i, e.Addr)
			}
			delete(blocks, e.Addr)
		case memsnap.ActionFreeRequested:
			if _, ok := blocks[e.Addr]; !ok {
				report("event %d: free_requested at %#x: no block there (the viewer throws)", i, e.Addr)
			}
		case memsnap.ActionFreeCompleted:
			if _, ok := blocks[e.Addr]; ok {
				report("event %d: free_completed at %#x: a live block is there after it", i, e.Addr)
			}
			if holding(e.Addr, e.Size) < 0 {
				report("event %d: free_completed of %d bytes at %#x: no segment holds the block before it", i, e.Size, e.Addr)
			}
			blocks[e.Addr] = e.Size
		case memsnap.ActionSegmentAlloc:
			j := slices.IndexFunc(segs, func(s replaySeg) bool { return s.addr == e.Addr })
			if j < 0 || segs[j].size != e.Size {
				report("event %d: segment_alloc of %d bytes at %#x: no such segment after it", i, e.Size, e.Addr)
				if j < 0 {
					continue
				}
			}
			if b, ok := liveIn(e.Addr, e.Size); ok {
				report("event %d: segment_alloc at %#x: block %#x is live before the segment exists", i, e.Addr, b)
			}
			segs = slices.Delete(segs, j, j+1)
		case memsnap.ActionSegmentFree:
			if overlaps(e.Addr, e.Size) {
				report("event %d: segment_free of %d bytes at %#x: memory still held by a segment after it", i, e.Size, e.Addr)
			}
			j, _ := slices.BinarySearchFunc(segs, e.Addr, func(s replaySeg, a uint64) int { return cmpU64(s.addr, a) })
			segs = slices.Insert(segs, j, replaySeg{e.Addr, e.Size, e.Stream})
		case memsnap.ActionSegmentMap:
			j := holding(e.Addr, e.Size)
			if j < 0 {
				report("event %d: segment_map of %d bytes at %#x: no segment holds that range after it (the viewer throws)", i, e.Size, e.Addr)
				continue
			}
			if b, ok := liveIn(e.Addr, e.Size); ok {
				report("event %d: segment_map of %d bytes at %#x: block %#x is live before the pages are mapped", i, e.Size, e.Addr, b)
			}
			s := segs[j]
			switch {
			case s.addr == e.Addr && s.size == e.Size:
				segs = slices.Delete(segs, j, j+1)
			case s.addr == e.Addr:
				segs[j] = replaySeg{e.Addr + e.Size, s.size - e.Size, s.stream}
			case s.end() == e.Addr+e.Size:
				segs[j].size -= e.Size
			default:
				segs[j].size = e.Addr - s.addr
				segs = slices.Insert(segs, j+1, replaySeg{e.Addr + e.Size, s.end() - e.Addr - e.Size, s.stream})
			}
		case memsnap.ActionSegmentUnmap:
			if overlaps(e.Addr, e.Size) {
				report("event %d: segment_unmap of %d bytes at %#x: memory still mapped after it", i, e.Size, e.Addr)
			}
			j, _ := slices.BinarySearchFunc(segs, e.Addr, func(s replaySeg, a uint64) int { return cmpU64(s.addr, a) })
			segs = slices.Insert(segs, j, replaySeg{e.Addr, e.Size, e.Stream})
			if j+1 < len(segs) && segs[j].end() == segs[j+1].addr && segs[j].stream == segs[j+1].stream {
				segs[j].size += segs[j+1].size
				segs = slices.Delete(segs, j+1, j+2)
			}
			if j > 0 && segs[j-1].end() == segs[j].addr && segs[j-1].stream == segs[j].stream {
				segs[j-1].size += segs[j].size
				segs = slices.Delete(segs, j, j+1)
			}
		}
	}
	return probs
}

func cmpU64(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// traceWorkload runs a seeded mix of allocations and frees of 1 KiB to
// 40 MiB on two streams, some noted on a third (pending frees), with a
// release every 40 operations, so that pages are mapped next to free
// blocks, between live ones, and unmapped again; it returns the
// allocator's snapshot with everything still live.
func traceWorkload(t testing.TB, conf string, seed uint64, ops int) *memsnap.Snapshot {
	t.Helper()
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=256MiB")
	ss := streams(t, dev, 3)
	a := newAlloc(t, dev, conf)
	r := rand.New(rand.NewPCG(seed, 36))
	var held []driver.Ptr
	for i := range ops {
		if i%40 == 39 {
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
		}
		if len(held) > 0 && (r.IntN(5) < 2 || len(held) > 24) {
			j := r.IntN(len(held))
			p := held[j]
			held = slices.Delete(held, j, j+1)
			if r.IntN(6) == 0 {
				if err := a.RecordStream(p, ss[2]); err != nil {
					t.Fatal(err)
				}
			}
			mustFree(t, a, p)
			continue
		}
		size := uint64(1+r.IntN(1024)) * kib
		if r.IntN(2) == 0 {
			size = uint64(1+r.IntN(40*1024)) * kib
		}
		p, err := a.Alloc(size, ss[r.IntN(2)])
		if IsOOM(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	return a.Snapshot()
}

// TestTraceReplaysOntoSegments replays expandable and plain snapshots'
// traces against their segments as PyTorch's viewer does (replayTrace).
// A segment_map entry used to carry the start of the free block the new
// pages merged with, not where they were mapped, and the viewer threw
// at most event indexes.
func TestTraceReplaysOntoSegments(t *testing.T) {
	for _, conf := range []string{
		"expandable_segments:true,history_entries:100000",
		"expandable_segments:true,history_entries:300", // the ring wraps: the replay starts mid-history
		"history_entries:100000",
	} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/%d", conf, seed), func(t *testing.T) {
				snap := traceWorkload(t, conf, seed, 400)
				consistent(t, snap)
				segmentSums(t, snap)
				tr := snap.DeviceTraces[0]
				counts := map[string]int{}
				for _, e := range tr {
					counts[e.Action]++
				}
				mapping := []string{memsnap.ActionSegmentAlloc, memsnap.ActionSegmentFree}
				if snap.Device.ExpandableInUse {
					mapping = []string{memsnap.ActionSegmentMap, memsnap.ActionSegmentUnmap}
				}
				for _, act := range append(mapping, memsnap.ActionAlloc, memsnap.ActionFreeCompleted) {
					if counts[act] == 0 {
						t.Fatalf("the workload recorded no %s entry (%v): it tests nothing", act, counts)
					}
				}
				for _, p := range replayTrace(snap, 0) {
					t.Error(p)
				}
			})
		}
	}
}

// segmentSums checks each segment's sizes against its blocks as PyTorch's
// snapshot computes them: allocated_size sums allocated blocks;
// active_size and requested_size sum active ones, pending frees included.
func segmentSums(t testing.TB, snap *memsnap.Snapshot) {
	t.Helper()
	for _, s := range snap.Segments {
		var alloc, active, req uint64
		for _, b := range s.Blocks {
			switch b.State {
			case memsnap.StateActiveAllocated:
				alloc += b.Size
				fallthrough
			case memsnap.StateActivePendingFree:
				active += b.Size
				req += b.RequestedSize
			}
		}
		if s.AllocatedSize != alloc || s.ActiveSize != active || s.RequestedSize != req {
			t.Errorf("segment %#x: allocated/active/requested %d/%d/%d, its blocks add up to %d/%d/%d",
				s.Address, s.AllocatedSize, s.ActiveSize, s.RequestedSize, alloc, active, req)
		}
	}
}

// TestSnapshotRequestedSizeCountsPendingFree: a block freed while another
// stream still uses it is active, and PyTorch's snapshot counts its
// requested bytes in the segment's requested_size.
func TestSnapshotRequestedSizeCountsPendingFree(t *testing.T) {
	for _, conf := range []string{"", "expandable_segments:true"} {
		t.Run(conf, func(t *testing.T) {
			dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
			ss := streams(t, dev, 2)
			a := newAlloc(t, dev, conf)
			mustAlloc(t, a, 1000, ss[0])
			q := mustAlloc(t, a, 3*mib+5, ss[0])
			if err := a.RecordStream(q, ss[1]); err != nil {
				t.Fatal(err)
			}
			gate(t, dev, ss[1])
			mustFree(t, a, q) // pending until the gate opens
			snap := a.Snapshot()
			var pending int
			for _, s := range snap.Segments {
				for _, b := range s.Blocks {
					if b.State == memsnap.StateActivePendingFree {
						pending++
						if b.RequestedSize != 3*mib+5 {
							t.Errorf("pending block requested_size %d, want %d", b.RequestedSize, 3*mib+5)
						}
					}
				}
			}
			if pending != 1 {
				t.Fatalf("%d pending blocks, want 1", pending)
			}
			segmentSums(t, snap)
		})
	}
}
