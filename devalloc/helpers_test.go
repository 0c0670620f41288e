package devalloc

import (
	"fmt"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/sim"
)

func newAlloc(t testing.TB, dev driver.Device, conf string) *Allocator {
	t.Helper()
	cfg, err := ParseConfig(conf)
	if err != nil {
		t.Fatalf("ParseConfig(%q): %v", conf, err)
	}
	a, err := New(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// newResource opens the resource conf's backend names (Open), closed at
// cleanup.
func newResource(t testing.TB, dev driver.Device, conf string) Resource {
	t.Helper()
	cfg, err := ParseConfig(conf)
	if err != nil {
		t.Fatalf("ParseConfig(%q): %v", conf, err)
	}
	r, err := Open(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func streams(t testing.TB, dev driver.Device, n int) []driver.Stream {
	t.Helper()
	out := make([]driver.Stream, n)
	for i := range out {
		s, err := dev.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = s
	}
	return out
}

func mustAlloc(t testing.TB, a Resource, size uint64, s driver.Stream) driver.Ptr {
	t.Helper()
	p, err := a.Alloc(size, s)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", size, err)
	}
	return p
}

func mustFree(t testing.TB, a Resource, p driver.Ptr) {
	t.Helper()
	if err := a.Free(p); err != nil {
		t.Fatalf("Free(%v): %v", p, err)
	}
}

// shadow records every live allocation and fails on overlap or on a
// pointer handed out twice. Safe for concurrent use.
type shadow struct {
	mu   sync.Mutex
	live map[driver.Ptr]uint64 // start -> size
	errs []string
}

func newShadow() *shadow { return &shadow{live: map[driver.Ptr]uint64{}} }

// add records [p, p+size); it reports an error when it overlaps a live range.
func (s *shadow) add(p driver.Ptr, size uint64) {
	if p == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.live[p]; dup {
		s.errs = append(s.errs, fmt.Sprintf("pointer %v returned twice while live", p))
		return
	}
	for q, n := range s.live {
		if p < q+driver.Ptr(n) && q < p+driver.Ptr(size) {
			s.errs = append(s.errs, fmt.Sprintf("[%v,+%d) overlaps live [%v,+%d)", p, size, q, n))
		}
	}
	s.live[p] = size
}

// remove forgets a live range before it is freed.
func (s *shadow) remove(p driver.Ptr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live[p]; !ok {
		s.errs = append(s.errs, fmt.Sprintf("free of %v which the shadow does not hold", p))
	}
	delete(s.live, p)
}

func (s *shadow) check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.errs {
		if i == 10 {
			t.Errorf("... and %d more", len(s.errs)-10)
			break
		}
		t.Error("shadow: " + e)
	}
}

// consistent checks a snapshot against itself: blocks tile each segment
// exactly, and block sums match the stats taken at the same instant.
func consistent(t testing.TB, snap *memsnap.Snapshot) {
	t.Helper()
	var reserved, allocated, active, requested, nalloc, nseg uint64
	type rangeKey struct {
		stream uint64
		typ    string
	}
	ranges := map[rangeKey]bool{} // an expandable range shows as one segment per mapped run
	for _, seg := range snap.Segments {
		at := seg.Address
		var segAlloc, segActive uint64
		for _, b := range seg.Blocks {
			if b.Address != at {
				t.Errorf("segment %#x: block at %#x, want %#x (blocks must tile the segment)", seg.Address, b.Address, at)
			}
			at += b.Size
			switch b.State {
			case memsnap.StateActiveAllocated:
				segAlloc += b.Size
				segActive += b.Size
				requested += b.RequestedSize
				nalloc++
			case memsnap.StateActivePendingFree:
				segActive += b.Size
			case memsnap.StateInactive:
			default:
				t.Errorf("block %#x: unknown state %q", b.Address, b.State)
			}
		}
		if at != seg.Address+seg.TotalSize {
			t.Errorf("segment %#x: blocks end at %#x, segment at %#x", seg.Address, at, seg.Address+seg.TotalSize)
		}
		if segAlloc != seg.AllocatedSize || segActive != seg.ActiveSize {
			t.Errorf("segment %#x: allocated/active %d/%d, blocks say %d/%d", seg.Address, seg.AllocatedSize, seg.ActiveSize, segAlloc, segActive)
		}
		reserved += seg.TotalSize
		allocated += segAlloc
		active += segActive
		if seg.IsExpandable {
			ranges[rangeKey{seg.Stream, seg.SegmentType}] = true
		} else {
			nseg++
		}
	}
	nseg += uint64(len(ranges))
	for k, want := range map[string]uint64{
		"reserved_bytes.all.current":  reserved,
		"allocated_bytes.all.current": allocated,
		"active_bytes.all.current":    active,
		"requested_bytes.all.current": requested,
		"allocation.all.current":      nalloc,
	} {
		if got := snap.Stats[k]; uint64(got) != want {
			t.Errorf("snapshot stats %s = %d, blocks add up to %d", k, got, want)
		}
	}
	if got := snap.Stats["segment.all.current"]; uint64(got) < nseg {
		t.Errorf("segment.all.current = %d < %d segments with memory", got, nseg)
	}
}

func openDevHooks(t testing.TB, dev driver.Device) *sim.Device {
	t.Helper()
	h := sim.Hooks(dev)
	if h == nil {
		t.Fatalf("device %T is not a sim device", dev)
	}
	return h
}
