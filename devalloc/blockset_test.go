package devalloc

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

// TestBlockSetMatchesSorted drives a blockSet through random inserts,
// removes and best-fit takes (find+removeAt) across chunk splits and
// drains, and checks it against a sorted slice after every step.
func TestBlockSetMatchesSorted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sizes   uint64 // distinct sizes drawn from
		ops     int
		inserts int // out of 10 ops; above 5 the set grows (chunk splits)
	}{
		{"fewSizes", 4, 5000, 6},
		{"manySizes", 1 << 20, 5000, 6},
		{"drainRefill", 2, 600, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.ops)))
			var s blockSet
			var ref []*block
			var next driver.Ptr
			less := func(x, y *block) int {
				return cmp.Or(cmp.Compare(x.size, y.size), cmp.Compare(x.ptr, y.ptr))
			}
			maxChunks := 0
			for op := range tc.ops {
				switch k := r.IntN(10); {
				case k < tc.inserts || len(ref) == 0:
					next += 512
					b := &block{ptr: next, size: 512 * (1 + r.Uint64N(tc.sizes))}
					s.insert(b)
					ref = append(ref, b)
					slices.SortFunc(ref, less)
				case k < tc.inserts+(10-tc.inserts)/2:
					i := r.IntN(len(ref))
					if !s.remove(ref[i]) {
						t.Fatalf("op %d: remove of a member failed", op)
					}
					ref = slices.Delete(ref, i, i+1)
				default:
					want := 512 * (1 + r.Uint64N(tc.sizes))
					ci, i := s.find(want, 0)
					j, _ := slices.BinarySearchFunc(ref, want, func(b *block, w uint64) int { return cmp.Compare(b.size, w) })
					if j == len(ref) {
						if ci != len(s.chunks) {
							t.Fatalf("op %d: find(%d) found a block, want none", op, want)
						}
						continue
					}
					if ci == len(s.chunks) || s.chunks[ci][i].b != ref[j] {
						t.Fatalf("op %d: find(%d) is not the best fit", op, want)
					}
					s.removeAt(ci, i)
					ref = slices.Delete(ref, j, j+1)
				}
				if s.n != len(ref) || len(s.last) != len(s.chunks) {
					t.Fatalf("op %d: n=%d chunks=%d last=%d, want n=%d", op, s.n, len(s.chunks), len(s.last), len(ref))
				}
				maxChunks = max(maxChunks, len(s.chunks))
				var got []*block
				s.each(func(b *block) bool { got = append(got, b); return true })
				if !slices.Equal(got, ref) {
					t.Fatalf("op %d: set order differs from sorted reference", op)
				}
				for ci, c := range s.chunks {
					if len(c) == 0 || len(c) > chunkMax || s.last[ci] != (setKey2{c[len(c)-1].size, c[len(c)-1].ptr}) {
						t.Fatalf("op %d: chunk %d: len %d, last key %v stale", op, ci, len(c), s.last[ci])
					}
				}
			}
			t.Logf("%d left, at most %d chunks", len(ref), maxChunks)
		})
	}
}
