package devalloc

import (
	"math/rand/v2"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// checkIndexes checks the release indexes and the set index (index.go)
// against the free sets they summarise: each free block is on the whole list
// exactly when it is a whole plain segment and on the page list exactly when it
// is an expandable block holding a whole page; each pool's whole list is in
// freedAt order and holds only that pool's segments; emptyRanges is the ranges with nothing mapped; the largest free
// block is what a scan finds; every indexed set holds a segment (or a grow
// is in flight).
func checkIndexes(t testing.TB, a *Allocator) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	onList := map[*block]uint8{}
	onPage := map[*freeSet]int{}
	for _, l := range []struct {
		list  *blockList
		which uint8
		small bool
	}{{&a.rel.whole[0], listWhole, false}, {&a.rel.whole[1], listWhole, true}, {&a.rel.page[0], listPage, false}, {&a.rel.page[1], listPage, true}} {
		n := 0
		var prev *block
		for b := l.list.head; b != nil; b = b.rnext {
			if b.rprev != prev || b.rlist != l.which {
				t.Fatalf("release list %d: broken links or tag at %v", l.which, b.ptr)
			}
			if l.which == listWhole && prev != nil && prev.freedAt >= b.freedAt {
				t.Fatalf("whole list out of freedAt order: %d before %d", prev.freedAt, b.freedAt)
			}
			if b.seg.set.small != l.small {
				t.Fatalf("block %v of the small pool %v on release list %d of the other pool", b.ptr, b.seg.set.small, l.which)
			}
			if l.which == listPage {
				onPage[b.seg.set]++
			}
			onList[b] = l.which
			prev, n = b, n+1
		}
		if prev != l.list.tail || n != l.list.n {
			t.Fatalf("release list %d: tail or count (%d, walked %d) wrong", l.which, l.list.n, n)
		}
	}
	var largest [2]uint64
	sets := 0
	for fs := a.setHead; fs != nil; fs = fs.nextSet {
		sets++
		if fs.dropped || len(fs.segs) == 0 && fs.pins == 0 {
			t.Fatalf("set of stream %d (small %v) is listed with no segment", fs.id, fs.small)
		}
		if a.lookupLocked(fs.id, fs.small) != fs {
			t.Fatalf("set of stream %d (small %v) is not indexed", fs.id, fs.small)
		}
		if err := fs.free.checkClasses(); err != nil {
			t.Fatalf("set of stream %d (small %v): %v", fs.id, fs.small, err)
		}
		if fs.free.onPage != onPage[fs] {
			t.Fatalf("set of stream %d (small %v) counts %d blocks on the page list, %d are", fs.id, fs.small, fs.free.onPage, onPage[fs])
		}
		for seg := range fs.segs {
			if seg.exp != nil {
				_, empty := a.emptyRanges[seg]
				if empty != (seg.exp.mapped == 0) {
					t.Fatalf("range %v: mapped %d, on emptyRanges %v", seg.ptr, seg.exp.mapped, empty)
				}
			}
			for b := seg.head; b != nil; b = b.next {
				if b.seg != seg || b.exp != (seg.exp != nil) {
					t.Fatalf("block %v: segment %v (expandable %v), tiles %v", b.ptr, b.seg.ptr, b.exp, seg.ptr)
				}
				if b.set != fs || seg.set != fs {
					t.Fatalf("block %v: its set is not its segment's (%v)", b.ptr, seg.ptr)
				}
				if b.state != stateFree {
					if b.rlist != listNone {
						t.Fatalf("block %v in state %d is on release list %d", b.ptr, b.state, b.rlist)
					}
					continue
				}
				largest[boolBit(fs.small)] = max(largest[boolBit(fs.small)], b.size)
				want := listNone
				switch {
				case seg.exp == nil && b.prev == nil && b.next == nil:
					want = listWhole
				case seg.exp != nil && a.rel.holdsPage(b):
					want = listPage
				}
				if onList[b] != want {
					t.Fatalf("free block %v (%d bytes): on release list %d, want %d", b.ptr, b.size, onList[b], want)
				}
				delete(onList, b)
			}
		}
	}
	if len(onList) != 0 {
		t.Fatalf("%d blocks on release lists are not free blocks of a listed set", len(onList))
	}
	if sets != a.numSets {
		t.Fatalf("numSets %d, listed %d", a.numSets, sets)
	}
	for seg := range a.emptyRanges {
		if _, ok := seg.set.segs[seg]; !ok || seg.set.dropped {
			t.Fatalf("emptyRanges holds range %v of no listed set", seg.ptr)
		}
	}
	for i, small := range []bool{false, true} {
		if got := a.largestFreeLocked(small); got != largest[i] {
			t.Fatalf("largest free block (small %v) %d, a scan finds %d", small, got, largest[i])
		}
	}
}

// TestIndexesFollowRandomOps drives every configuration through random
// allocations, frees, releases and garbage collection and checks the
// indexes after each step.
func TestIndexesFollowRandomOps(t *testing.T) {
	for _, conf := range []string{"", "expandable_segments:true", "max_split_size_mb:24,cross_stream_reuse:true",
		"garbage_collection_threshold:0.4", "expandable_segments:true,cross_stream_reuse:true"} {
		t.Run("conf="+conf, func(t *testing.T) {
			dev, _ := drivertest.OpenDevice(t, "sim", "capacity=96MiB")
			a := newAlloc(t, dev, conf)
			ss := append([]driver.Stream{dev.DefaultStream()}, streams(t, dev, 3)...)
			r := rand.New(rand.NewPCG(1, 2))
			var held []driver.Ptr
			for op := range 3000 {
				switch k := r.IntN(20); {
				case k < 10:
					size := 1 + r.Uint64N(4096)
					if k >= 6 {
						size = 1 + r.Uint64N(24<<20)
					}
					p, err := a.Alloc(size, ss[r.IntN(len(ss))])
					if err != nil {
						if !IsOOM(err) {
							t.Fatal(err)
						}
						break
					}
					held = append(held, p)
				case k < 18:
					if len(held) > 0 {
						i := r.IntN(len(held))
						mustFree(t, a, held[i])
						held[i] = held[len(held)-1]
						held = held[:len(held)-1]
					}
				default:
					if err := a.EmptyCache(); err != nil {
						t.Fatal(err)
					}
				}
				if err := a.Drain(); err != nil {
					t.Fatal(err)
				}
				if op%7 == 0 {
					checkIndexes(t, a)
				}
			}
			for _, p := range held {
				mustFree(t, a, p)
			}
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			checkIndexes(t, a)
			if a.numSets != 0 {
				t.Errorf("%d sets left after everything was freed and released", a.numSets)
			}
		})
	}
}
