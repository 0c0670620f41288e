package devalloc

import (
	"testing"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// FuzzOps runs a random sequence of allocator operations, decoded from the
// fuzz input, against the shadow checker, and checks the snapshot and the
// end state.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, uint8(0))
	f.Add([]byte{0, 200, 0, 255, 1, 0, 3, 7, 0, 128, 2, 1, 4, 0, 5, 9}, uint8(1))
	f.Add([]byte{0, 9, 0, 9, 0, 9, 1, 0, 1, 1, 6, 0, 0, 9, 7, 0}, uint8(2))
	f.Add([]byte{0, 250, 0, 250, 0, 250, 0, 250, 1, 1, 0, 10, 5, 5}, uint8(3))
	f.Add([]byte{0, 200, 1, 201, 3, 0, 0, 220, 2, 202, 4, 1, 0, 230}, uint8(5))
	confs := []string{"", "expandable_segments:true", "max_split_size_mb:24,cross_stream_reuse:true", "roundup_power2_divisions:[1:2,>:4],garbage_collection_threshold:0.5",
		"release_before_grow:false", "expandable_segments:true,release_before_grow:false,cross_stream_reuse:true",
		"expandable_segments:true,max_split_size_mb:24,cross_stream_reuse:true"}
	f.Fuzz(func(t *testing.T, ops []byte, conf uint8) {
		if len(ops) > 512 {
			ops = ops[:512]
		}
		dev, _ := drivertest.OpenDevice(t, "sim", "capacity=96MiB")
		a := newAlloc(t, dev, confs[int(conf)%len(confs)])
		ss := append([]driver.Stream{dev.DefaultStream()}, streams(t, dev, 2)...)
		sh := newShadow()
		var held []live
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, ops[i+1]
			s := ss[int(arg)%len(ss)]
			switch op {
			case 0, 1, 2: // alloc: arg picks a size from 1 B to ~48 MiB
				size := uint64(arg)*uint64(arg)*uint64(arg)/8 + uint64(arg) + 1
				if op == 1 {
					size = uint64(arg) * 512
				}
				p, err := a.Alloc(size, s)
				if err != nil {
					if !IsOOM(err) {
						t.Fatalf("Alloc(%d): %v", size, err)
					}
					continue
				}
				if p == 0 {
					if size != 0 {
						t.Fatalf("Alloc(%d) returned 0 without an error", size)
					}
					continue
				}
				sh.add(p, size)
				held = append(held, live{p, size})
			case 3, 4: // free
				if len(held) == 0 {
					continue
				}
				j := int(arg) % len(held)
				sh.remove(held[j].p)
				if err := a.Free(held[j].p); err != nil {
					t.Fatal(err)
				}
				held = append(held[:j], held[j+1:]...)
			case 5: // record stream
				if len(held) > 0 {
					if err := a.RecordStream(held[int(arg)%len(held)].p, s); err != nil {
						t.Fatal(err)
					}
				}
			case 6:
				if err := a.EmptyCache(); err != nil {
					t.Fatal(err)
				}
				noFreeWholePages(t, a)
			case 7:
				a.Poll()
				consistent(t, a.Snapshot())
				checkIndexes(t, a)
				checkOversize(t, a)
			}
		}
		sh.check(t)
		checkIndexes(t, a)
		for _, x := range held {
			if err := a.Free(x.p); err != nil {
				t.Fatal(err)
			}
		}
		checkDrained(t, a)
	})
}

// noFreeWholePages checks that EmptyCache left no free whole page mapped in
// an expandable range.
func noFreeWholePages(t *testing.T, a *Allocator) {
	t.Helper()
	if a.vmm == nil {
		return
	}
	for _, seg := range a.Snapshot().Segments {
		for _, b := range seg.Blocks {
			if b.State != memsnap.StateInactive {
				continue
			}
			if first := (b.Address + a.gran - 1) / a.gran * a.gran; first+a.gran <= b.Address+b.Size {
				t.Fatalf("after EmptyCache the free block [%#x,+%d) still holds the whole page at %#x", b.Address, b.Size, first)
			}
		}
	}
}

// checkOversize checks oversize_allocations against the snapshot: the
// allocated blocks of plain segments of at least max_split_size, none of an
// expandable range.
func checkOversize(t *testing.T, a *Allocator) {
	t.Helper()
	var n int64
	for _, seg := range a.Snapshot().Segments {
		for _, b := range seg.Blocks {
			if a.maxSplit != 0 && !seg.IsExpandable && b.State == memsnap.StateActiveAllocated && b.Size >= a.maxSplit {
				n++
			}
		}
	}
	if got := a.Stats().OversizeAllocations.Current; got != n {
		t.Fatalf("oversize_allocations.current = %d; the snapshot holds %d allocated oversize blocks of plain segments", got, n)
	}
}
