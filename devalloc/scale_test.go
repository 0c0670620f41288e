package devalloc

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// countingStream counts the allocator's Synchronize calls on a stream.
type countingStream struct {
	driver.Stream
	syncs *atomic.Int64
}

func (s countingStream) Synchronize() error {
	s.syncs.Add(1)
	return s.Stream.Synchronize()
}

// manyStreamsWork replays the shape of an RMM trace with one stream per
// request: n streams each allocate 1 KiB and keep it, on a device of
// capMiB, so the first capMiB/2 streams each hold a small segment and
// every later one goes through the OOM path (release, retry, OOMError).
// It returns the sets and blocks the slow paths looked at and the stream
// synchronisations of that run: counts that follow the work done.
func manyStreamsWork(t *testing.T, conf string, capMiB, n int) (visits uint64, syncs int64) {
	dev, _ := drivertest.OpenDevice(t, "sim", fmt.Sprintf("capacity=%dMiB", capMiB))
	a := newAlloc(t, dev, conf)
	var count atomic.Int64
	ss := make([]driver.Stream, n)
	for i, s := range streams(t, dev, n) {
		ss[i] = countingStream{s, &count}
	}
	var live []driver.Ptr
	ooms := 0
	for _, s := range ss {
		p, err := a.Alloc(1024, s)
		if err != nil {
			if !IsOOM(err) {
				t.Fatal(err)
			}
			ooms++
			continue
		}
		live = append(live, p)
	}
	if held := capMiB / 2; !a.cfg.CrossStreamReuse && (len(live) != held || ooms != n-held) {
		t.Fatalf("%d streams: %d allocations, %d OOMs; want %d and %d", n, len(live), ooms, held, n-held)
	}
	a.mu.Lock()
	visits = a.visits
	a.mu.Unlock()
	syncs = count.Load()
	for _, p := range live {
		mustFree(t, a, p)
	}
	return visits, syncs
}

// TestManyStreamsScale checks that the OOM path costs what it releases,
// not a scan of every stream's cache: with 4x the streams holding memory
// and 4x the streams that then fail, the run does about 4x the work (a
// scan per OOM over the streams holding memory does 16x).
func TestManyStreamsScale(t *testing.T) {
	for _, conf := range []string{"", "expandable_segments:true", "garbage_collection_threshold:0.5", "cross_stream_reuse:true"} {
		t.Run("conf="+conf, func(t *testing.T) {
			v1, s1 := manyStreamsWork(t, conf, 128, 300)
			v4, s4 := manyStreamsWork(t, conf, 512, 1200)
			t.Logf("300 streams, 64 segments fit: %d visits, %d syncs; 1200 and 256: %d, %d", v1, s1, v4, s4)
			if v4 > 6*max(v1, 1) {
				t.Errorf("the slow paths looked at %d sets and blocks, then %d for 4x the streams (linear: 4x)", v1, v4)
			}
			if s4 > 6*max(s1, 1) {
				t.Errorf("stream synchronisations grew from %d to %d for 4x the streams", s1, s4)
			}
		})
	}
}

// TestEmptySetsDropped checks that a stream's free sets go once they hold
// no segment, and that the stream is usable again afterwards.
func TestEmptySetsDropped(t *testing.T) {
	for _, conf := range []string{"", "expandable_segments:true", "garbage_collection_threshold:0.5"} {
		t.Run("conf="+conf, func(t *testing.T) {
			dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
			a := newAlloc(t, dev, conf)
			ss := streams(t, dev, 40)
			var live []driver.Ptr
			for i, s := range ss {
				p, err := a.Alloc(1024, s)
				if err != nil {
					if !IsOOM(err) {
						t.Fatal(err)
					}
					continue
				}
				if i%2 == 0 {
					mustFree(t, a, p) // cached: the set stays until a release
				} else {
					live = append(live, p)
				}
			}
			if a.numSets < len(live) {
				t.Fatalf("%d sets for %d streams with live blocks", a.numSets, len(live))
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if a.numSets != len(live) {
				t.Errorf("after EmptyCache: %d sets, want %d (one per stream with a live block)", a.numSets, len(live))
			}
			for _, p := range live {
				mustFree(t, a, p)
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if a.numSets != 0 || a.setHead != nil || len(a.sparse) != 0 {
				t.Errorf("after freeing everything and EmptyCache: %d sets", a.numSets)
			}
			for _, fs := range a.dense {
				if fs != nil {
					t.Fatal("a dropped set is still indexed")
				}
			}
			// Streams come back: new sets, same behaviour.
			p := mustAlloc(t, a, 1024, ss[0])
			if a.numSets != 1 {
				t.Errorf("%d sets after one allocation", a.numSets)
			}
			mustFree(t, a, p)
			checkDrained(t, a)
		})
	}
}

// TestHoldsStream checks what HoldsStream reports through a stream's
// life: nothing before use, true while it holds live or cached memory,
// false once the cache is released, and nothing for passthrough.
func TestHoldsStream(t *testing.T) {
	for _, conf := range []string{"", "expandable_segments:true", "backend:passthrough"} {
		t.Run("conf="+conf, func(t *testing.T) {
			dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
			a := newResource(t, dev, conf)
			caches := conf != "backend:passthrough"
			s := streams(t, dev, 2)
			if a.HoldsStream(s[0]) || a.HoldsStream(nil) {
				t.Fatal("holds an unused stream")
			}
			small := mustAlloc(t, a, 1024, s[0])
			large := mustAlloc(t, a, 4<<20, s[0])
			if got := a.HoldsStream(s[0]); got != caches {
				t.Errorf("with live blocks: HoldsStream %v", got)
			}
			if a.HoldsStream(s[1]) {
				t.Error("holds another stream")
			}
			mustFree(t, a, small)
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if got := a.HoldsStream(s[0]); got != caches {
				t.Errorf("with one large block live: HoldsStream %v", got)
			}
			mustFree(t, a, large)
			if got := a.HoldsStream(s[0]); got != caches {
				t.Errorf("with the large segment cached: HoldsStream %v", got)
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			if a.HoldsStream(s[0]) {
				t.Error("holds a stream after its cache was released")
			}
		})
	}
}
