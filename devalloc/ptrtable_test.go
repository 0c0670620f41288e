package devalloc

import (
	"math/rand/v2"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

// TestPtrTableMatchesMap drives a ptrTable beside a Go map of the live
// allocations through random allocations, frees, pending frees and their
// undoing, and block objects reused at other addresses (as merges and
// splits recycle them), with addresses from a small range so that probe
// runs collide and wrap around the table end. Every lookup must name the
// live block or nothing, and the stale entries must stay bounded: the
// table at most half full, and at most 8 slots per live block (or the
// minimum size) right after it rebuilds.
func TestPtrTableMatchesMap(t *testing.T) {
	for _, span := range []uint64{64, 4096, 1 << 20} {
		r := rand.New(rand.NewPCG(span, 7))
		var tb ptrTable
		ref := map[driver.Ptr]*block{}
		var spare []*block // blocks not allocated: freed, pending or new
		maxLive := 0
		for op := range 200000 {
			p := driver.Ptr((1 + r.Uint64N(span)) << 9)
			switch r.IntN(5) {
			case 0, 1: // allocate at p, when p is not live
				if ref[p] != nil {
					continue
				}
				var b *block
				if n := len(spare); n > 0 && r.IntN(2) == 0 {
					i := r.IntN(n)
					b = spare[i]
					spare[i] = spare[n-1]
					spare = spare[:n-1]
				} else {
					b = new(block)
				}
				b.ptr, b.state = p, stateAllocated
				before := len(tb.slots)
				tb.put(p, b)
				ref[p] = b
				maxLive = max(maxLive, len(ref))
				if len(tb.slots) != before && len(tb.slots) > max(minPtrTable, 8*(len(ref)+1)) {
					t.Fatalf("span %d op %d: rebuilt to %d slots for %d live blocks", span, op, len(tb.slots), len(ref))
				}
			case 2: // free p, or move it to pending free
				b := ref[p]
				if b == nil {
					continue
				}
				b.state = stateFree
				if r.IntN(4) == 0 {
					b.state = statePendingFree
				}
				delete(ref, p)
				spare = append(spare, b)
			case 3: // a freed block moves (merged, split, recycled)
				if n := len(spare); n > 0 {
					b := spare[r.IntN(n)]
					if b.state == stateFree {
						b.ptr = driver.Ptr((1 + r.Uint64N(span)) << 9)
					}
				}
			default:
				if got, want := tb.get(p), ref[p]; got != want {
					t.Fatalf("span %d op %d: get(%v) = %p, want %p", span, op, p, got, want)
				}
			}
			if 2*tb.n > len(tb.slots) {
				t.Fatalf("span %d op %d: %d of %d slots used", span, op, tb.n, len(tb.slots))
			}
		}
		for p, b := range ref {
			if got := tb.get(p); got != b {
				t.Fatalf("span %d: get(%v) = %p, want %p", span, p, got, b)
			}
		}
		// A pending free undone (evpool.ErrNotReleased) is put back.
		for _, b := range spare {
			if b.state == statePendingFree && ref[b.ptr] == nil {
				b.state = stateAllocated
				tb.put(b.ptr, b)
				ref[b.ptr] = b
				if tb.get(b.ptr) != b {
					t.Fatalf("span %d: undone pending free at %v not found", span, b.ptr)
				}
			}
		}
		t.Logf("span %d: %d slots, %d used, %d live (most %d)", span, len(tb.slots), tb.n, len(ref), maxLive)
	}
}
