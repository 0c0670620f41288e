package devalloc

import (
	"math/rand/v2"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

// TestPtrTableMatchesMap drives a ptrTable and a Go map through the same
// random puts, gets and deletes, with addresses drawn from a small range so
// that probe runs collide, wrap around the table end and get deleted from
// the middle (the backward shift), and checks every answer and the count.
func TestPtrTableMatchesMap(t *testing.T) {
	for _, span := range []uint64{64, 4096, 1 << 20} {
		r := rand.New(rand.NewPCG(span, 7))
		var tb ptrTable
		ref := map[driver.Ptr]*block{}
		for op := range 200000 {
			p := driver.Ptr((1 + r.Uint64N(span)) << 9)
			switch r.IntN(3) {
			case 0:
				b := &block{ptr: p}
				tb.put(p, b)
				ref[p] = b
			case 1:
				if got, want := tb.get(p), ref[p]; got != want {
					t.Fatalf("span %d op %d: get(%v) = %p, want %p", span, op, p, got, want)
				}
			default:
				if got, want := tb.del(p), ref[p]; got != want {
					t.Fatalf("span %d op %d: del(%v) = %p, want %p", span, op, p, got, want)
				}
				delete(ref, p)
			}
			if tb.n != len(ref) {
				t.Fatalf("span %d op %d: n = %d, want %d", span, op, tb.n, len(ref))
			}
		}
		seen := 0
		tb.all(func(p driver.Ptr, b *block) {
			if ref[p] != b {
				t.Fatalf("span %d: all yields %v -> %p, map has %p", span, p, b, ref[p])
			}
			seen++
		})
		if seen != len(ref) {
			t.Fatalf("span %d: all yields %d entries, want %d", span, seen, len(ref))
		}
	}
}
