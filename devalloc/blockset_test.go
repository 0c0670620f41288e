package devalloc

import (
	"cmp"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
)

// TestBlockSetMatchesSorted drives a blockSet through random inserts,
// removes and best-fit takes, and checks it against a sorted slice after
// every step: the best fit is the first block of the sorted order not
// below the request, and iteration and largest agree with that order.
func TestBlockSetMatchesSorted(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name    string
		size    func(r *rand.Rand) uint64
		ops     int
		inserts int // out of 10 ops; above 5 the set grows
	}{
		{"fewSizes", func(r *rand.Rand) uint64 { return 512 * (1 + r.Uint64N(4)) }, 5000, 6},
		{"manySmall", func(r *rand.Rand) uint64 { return 512 * (1 + r.Uint64N(4096)) }, 5000, 6},
		// Sizes spanning every bitmap level and the sorted list above
		// 128 MiB, with boundaries of leaf words, mid words and the limit.
		{"allLevels", func(r *rand.Rand) uint64 {
			switch r.IntN(4) {
			case 0:
				edges := []uint64{512, 64 * 512, 65 * 512, 4096 * 512, 4097 * 512,
					bucketedLimit - 512, bucketedLimit, bucketedLimit + 512, 512 * mib}
				return edges[r.IntN(len(edges))]
			case 1:
				return 512 * (1 + r.Uint64N(1<<19)) // up to 256 MiB
			}
			return 512 * (1 + r.Uint64N(1<<12)) << r.IntN(8)
		}, 8000, 6},
		{"drainRefill", func(r *rand.Rand) uint64 { return 512 * (1 + r.Uint64N(2)) }, 600, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tc.ops)))
			var s blockSet
			var ref []*block
			var next driver.Ptr
			less := func(x, y *block) int {
				return cmp.Or(cmp.Compare(x.size, y.size), cmp.Compare(x.ptr, y.ptr))
			}
			maxLen := 0
			for op := range tc.ops {
				switch k := r.IntN(10); {
				case k < tc.inserts || len(ref) == 0:
					// Addresses not monotonic in insert order, so heaps
					// see inserts below their minimum.
					next += 512
					b := &block{ptr: next ^ driver.Ptr(r.Uint64N(1<<8)<<40), size: tc.size(r)}
					s.insert(b)
					ref = append(ref, b)
					slices.SortFunc(ref, less)
				case k < tc.inserts+(10-tc.inserts)/2:
					i := r.IntN(len(ref))
					if !s.remove(ref[i]) {
						t.Fatalf("op %d: remove of a member failed", op)
					}
					if s.remove(ref[i]) {
						t.Fatalf("op %d: second remove of a block succeeded", op)
					}
					ref = slices.Delete(ref, i, i+1)
				default:
					want := tc.size(r)
					got := s.best(want)
					j, _ := slices.BinarySearchFunc(ref, want, func(b *block, w uint64) int { return cmp.Compare(b.size, w) })
					if j == len(ref) {
						if got != nil {
							t.Fatalf("op %d: best(%d) = %d bytes, want none", op, want, got.size)
						}
						continue
					}
					if got != ref[j] {
						t.Fatalf("op %d: best(%d) is not the best fit", op, want)
					}
					s.remove(got)
					ref = slices.Delete(ref, j, j+1)
				}
				if s.n != len(ref) {
					t.Fatalf("op %d: n=%d, want %d", op, s.n, len(ref))
				}
				maxLen = max(maxLen, len(ref))
				if op%17 == 0 || len(ref) < 3 {
					var got []*block
					s.each(func(b *block) bool { got = append(got, b); return true })
					if !slices.Equal(got, ref) {
						t.Fatalf("op %d: set order differs from sorted reference", op)
					}
					l := s.largest()
					if (l == nil) != (len(ref) == 0) || l != nil && l.size != ref[len(ref)-1].size {
						t.Fatalf("op %d: largest wrong", op)
					}
					if l != nil {
						want := 0
						for _, b := range ref {
							if b.size == l.size {
								want++
							}
						}
						if got := s.count(l.size); got != want {
							t.Fatalf("op %d: count(%d) = %d, want %d", op, l.size, got, want)
						}
					}
				}
			}
			t.Logf("%d left, at most %d", len(ref), maxLen)
		})
	}
}

// TestBlockSetRemoveForeign checks that remove of a block not in the set
// (never inserted, or of a class with no page yet) reports false and
// changes nothing.
func TestBlockSetRemoveForeign(t *testing.T) {
	var s blockSet
	in := &block{ptr: 4096, size: 1024}
	s.insert(in)
	for _, b := range []*block{
		{ptr: 8192, size: 1024},          // same class, not a member
		{ptr: 8192, size: 64 << 20},      // class page never created
		{ptr: 8192, size: bucketedLimit}, // sorted list, empty
	} {
		if s.remove(b) {
			t.Fatalf("remove of a non-member %d-byte block succeeded", b.size)
		}
	}
	if s.n != 1 || s.best(512) != in {
		t.Fatal("set changed by a failed remove")
	}
}

// each calls fn for every block in (size, address) order until fn returns
// false: the reference order the tests check the set against. It reads
// the set's parts (the class heaps, the sorted slice) directly.
func (s *blockSet) each(fn func(b *block) bool) {
	var all []*block
	for w, word := range s.leaf {
		for word != 0 {
			j := bits.TrailingZeros64(word)
			word &^= 1 << j
			c := uint64(w)<<6 | uint64(j)
			ch := &s.pages[w][j]
			for i, e := range ch.h {
				if i == 0 {
					e = ch.top // the root's true value (classHeap.flush)
				}
				if e.valid(c) {
					all = append(all, e.b)
				}
			}
		}
	}
	all = append(all, s.big...)
	slices.SortFunc(all, func(x, y *block) int {
		if blockLess(x, y) {
			return -1
		}
		return 1
	})
	for _, b := range all {
		if !fn(b) {
			return
		}
	}
}

// TestBlockLayout keeps what a cache hit touches of a block in its first
// 64 bytes, and the block 128 bytes, which Go's allocator aligns to 64.
func TestBlockLayout(t *testing.T) {
	var b block
	if n := unsafe.Sizeof(b); n != 128 {
		t.Errorf("block is %d bytes, want 128", n)
	}
	if end := unsafe.Offsetof(b.freedAt) + unsafe.Sizeof(b.freedAt); end > 64 {
		t.Errorf("the hit path's fields end at byte %d, past the first line", end)
	}
	if end := unsafe.Offsetof(b.set) + unsafe.Sizeof(b.set); end > 64 {
		t.Errorf("the block's set ends at byte %d, past the first line: Free would load the second", end)
	}
}

// TestBlockSetReusedBlocks drives a blockSet the way the allocator does:
// the same block objects leave and come back, often at the address and
// size they had (a hit's block returned: its stale root entry is revived),
// often changed (merged, split, recycled for another piece), and members
// are removed from anywhere (merges). After every step the set must match
// a sorted reference, and an insert leaves no class more than 2*live+9
// entries (stale ones included).
func TestBlockSetReusedBlocks(t *testing.T) {
	for _, sizes := range []uint64{2, 6, 64} {
		t.Run(fmt.Sprintf("classes=%d", sizes), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, sizes))
			var s blockSet
			var in, out []*block // members (kept sorted) and blocks outside
			for i := range 64 {
				out = append(out, &block{ptr: driver.Ptr(1+i) << 20, size: 512 * (1 + r.Uint64N(sizes))})
			}
			less := func(x, y *block) int {
				return cmp.Or(cmp.Compare(x.size, y.size), cmp.Compare(x.ptr, y.ptr))
			}
			for op := range 20000 {
				switch k := r.IntN(10); {
				case k < 4 && len(out) > 0: // a block comes back
					i := r.IntN(len(out))
					b := out[i]
					if r.IntN(3) == 0 { // changed while out: another piece, another size
						// Addresses stay unique among all the blocks, as
						// in a segment.
						taken := func(p driver.Ptr) bool {
							used := func(x *block) bool { return x != b && x.ptr == p }
							return slices.ContainsFunc(in, used) || slices.ContainsFunc(out, used)
						}
						p := driver.Ptr(1+r.IntN(64))<<20 + driver.Ptr(r.IntN(4))<<9
						for taken(p) {
							p += 1 << 9
						}
						b.ptr, b.size = p, 512*(1+r.Uint64N(sizes))
					}
					s.insert(b)
					if c := b.size >> classShift; len(s.bucket(c).h) > 2*int(s.bucket(c).live)+9 {
						t.Fatalf("op %d: class %d keeps %d entries for %d blocks", op, c, len(s.bucket(c).h), s.bucket(c).live)
					}
					out = slices.Delete(out, i, i+1)
					in = append(in, b)
					slices.SortFunc(in, less)
				case k < 7 && len(in) > 0: // a hit takes the best fit
					want := 512 * (1 + r.Uint64N(sizes))
					got := s.best(want)
					j, _ := slices.BinarySearchFunc(in, want, func(b *block, w uint64) int { return cmp.Compare(b.size, w) })
					if j == len(in) {
						if got != nil {
							t.Fatalf("op %d: best(%d) = %v, want none", op, want, got.ptr)
						}
						continue
					}
					if got != in[j] {
						t.Fatalf("op %d: best(%d) is not the best fit", op, want)
					}
					if !s.remove(got) {
						t.Fatalf("op %d: remove of the best fit failed", op)
					}
					out = append(out, got)
					in = slices.Delete(in, j, j+1)
				case len(in) > 0: // a merge takes a member from anywhere
					j := r.IntN(len(in))
					if !s.remove(in[j]) || s.remove(in[j]) {
						t.Fatalf("op %d: remove of a member did not succeed exactly once", op)
					}
					out = append(out, in[j])
					in = slices.Delete(in, j, j+1)
				}
				var got []*block
				s.each(func(b *block) bool { got = append(got, b); return true })
				if !slices.Equal(got, in) || s.n != len(in) {
					t.Fatalf("op %d: set differs from the sorted reference (%d blocks, want %d)", op, len(got), len(in))
				}
				if l := s.largest(); len(in) == 0 && l != nil || len(in) > 0 && (l == nil || l.size != in[len(in)-1].size) {
					t.Fatalf("op %d: largest is not of the largest size", op)
				}
				if err := s.checkClasses(); err != nil {
					t.Fatalf("op %d: %v", op, err)
				}
			}
		})
	}
}

// checkClasses checks the class heaps against the bitmaps: a class with
// blocks has its leaf bit set, a leaf bit is set exactly when the class
// is marked (it may be empty: bits are cleared lazily), mid and top
// summarise leaf exactly, and a heap's top is its root entry (the
// generation aside, which a revive changes in top alone).
func (s *blockSet) checkClasses() error {
	if len(s.leaf) != len(s.pages) {
		return fmt.Errorf("%d leaf words for %d pages", len(s.leaf), len(s.pages))
	}
	mid := make([]uint64, len(s.mid))
	var top uint64
	for w, word := range s.leaf {
		if word != 0 {
			mid[w>>6] |= 1 << (w & 63)
			top |= 1 << (w >> 6)
		}
		pg := s.pages[w]
		if pg == nil {
			if word != 0 {
				return fmt.Errorf("leaf word %d is %#x without a page", w, word)
			}
			continue
		}
		for j := range pg {
			ch := &pg[j]
			bit := word>>j&1 == 1
			if bit != ch.marked || ch.live > 0 && !bit {
				return fmt.Errorf("class %d: leaf bit %v, marked %v, %d blocks", w<<6|j, bit, ch.marked, ch.live)
			}
			if ch.live == 0 && len(ch.h) > 1 {
				return fmt.Errorf("class %d: no block, %d stale entries kept", w<<6|j, len(ch.h))
			}
			if len(ch.h) == 0 && ch.top != (heapEntry{}) ||
				len(ch.h) > 0 && (ch.top.b != ch.h[0].b || ch.top.ptr != ch.h[0].ptr) {
				return fmt.Errorf("class %d: top is not the root entry", w<<6|j)
			}
		}
	}
	if !slices.Equal(mid, s.mid) || top != s.top {
		return fmt.Errorf("mid and top do not summarise leaf")
	}
	return nil
}

var layoutSink [16]*freeSet

// TestClassHeapLayout keeps a class heap one 64-byte line, so that best
// fit reads one line of it, and the leaf and page headers beside the
// set's stream, in one line with it (Alloc reads all three).
func TestClassHeapLayout(t *testing.T) {
	if n := unsafe.Sizeof(classHeap{}); n != 64 {
		t.Errorf("classHeap is %d bytes, want 64", n)
	}
	var fs freeSet
	if end := unsafe.Offsetof(fs.free) + unsafe.Offsetof(fs.free.leaf) + unsafe.Sizeof(fs.free.leaf); end > 64 {
		t.Errorf("the set's stream, pages and leaf end at byte %d, past the first line", end)
	}
	for i := range layoutSink { // the size class of freeSet aligns it to 64
		layoutSink[i] = new(freeSet) // on the heap, as the allocator's are
		if p := uintptr(unsafe.Pointer(layoutSink[i])); p%64 != 0 {
			t.Fatalf("a freeSet (%d bytes) at %#x is not 64-byte aligned", unsafe.Sizeof(fs), p)
		}
	}
}
