package sim

import (
	"cmp"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// model is what the table must agree with: the live regions by base,
// searched by brute force.
type model map[uint64]*region

func (m model) find(p uint64) *region {
	for _, r := range m {
		if r.base <= p && p < r.end() {
			return r
		}
	}
	return nil
}

func (m model) overlaps(p, n uint64) bool {
	for _, r := range m {
		if r.base < p+n && p < r.end() {
			return true
		}
	}
	return false
}

// checkTreap walks the tree: bases strictly increasing in order, each
// parent's priority at least its children's, priorities as priority()
// gives them, and n the node count. It returns the height.
func checkTreap(t *testing.T, tb *table) int {
	t.Helper()
	var prev *region
	count := 0
	var walk func(x *region) int
	walk = func(x *region) int {
		if x == nil {
			return 0
		}
		hl := walk(x.left)
		if prev != nil && prev.end() > x.base {
			t.Fatalf("regions out of order or overlapping: [%#x, %#x) before [%#x, %#x)", prev.base, prev.end(), x.base, x.end())
		}
		if x.prio != priority(x.base) {
			t.Fatalf("region %#x has priority %#x, want %#x", x.base, x.prio, priority(x.base))
		}
		for _, c := range []*region{x.left, x.right} {
			if c != nil && c.prio > x.prio {
				t.Fatalf("child %#x (priority %#x) above its parent %#x (priority %#x)", c.base, c.prio, x.base, x.prio)
			}
		}
		prev = x
		count++
		return 1 + max(hl, walk(x.right))
	}
	h := walk(tb.root)
	if count != tb.n {
		t.Fatalf("tree holds %d regions, n = %d", count, tb.n)
	}
	return h
}

// TestTableMatchesModel runs random inserts, removes (of live regions, of
// regions already removed, of a stranger at a live base), point lookups
// and overlap queries against the table and a brute-force model, checking
// the treap's invariants as it goes and the drained order at the end.
func TestTableMatchesModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 36))
			tb, m := newTable(), model{}
			var gone []*region
			const space = 1 << 20 // a small address space, so ranges collide often
			randRange := func() (uint64, uint64) {
				p := uint64(rng.IntN(space))
				return p, uint64(1 + rng.IntN(1+rng.IntN(4096)))
			}
			for op := range 6000 {
				switch k := rng.IntN(10); {
				case k < 4: // insert where the model says it is free
					p, n := randRange()
					if m.overlaps(p, n) {
						if tb.overlapLocked(p, n) == nil {
							t.Fatalf("op %d: overlapLocked(%#x, %d) = nil; the model has a region there", op, p, n)
						}
						continue
					}
					r := &region{base: p, size: n}
					if !tb.insertLocked(r) {
						t.Fatalf("op %d: insertLocked refused on an open table", op)
					}
					m[p] = r
				case k < 6 && len(m) > 0: // remove a live region
					var r *region
					for _, r = range m {
						break
					}
					tb.removeLocked(r)
					if !r.dead {
						t.Fatalf("op %d: removed region %#x not marked dead", op, r.base)
					}
					delete(m, r.base)
					gone = append(gone, r)
				case k < 7 && len(gone) > 0: // remove one removed before: nothing happens
					r := gone[rng.IntN(len(gone))]
					if live := m[r.base]; live != nil {
						tb.removeLocked(&region{base: r.base, size: 1}) // a stranger at a live base
						if tb.findLocked(r.base) != live {
							t.Fatalf("op %d: removing a stranger at %#x took the live region out", op, r.base)
						}
					}
					tb.removeLocked(r)
				case k < 9: // point lookups, at region edges too
					p, _ := randRange()
					if r := m.find(p); r != nil && rng.IntN(2) == 0 {
						p = []uint64{r.base, r.end() - 1, r.end()}[rng.IntN(3)]
					}
					if got, want := tb.findLocked(p), m.find(p); got != want {
						t.Fatalf("op %d: findLocked(%#x) = %v, model %v", op, p, got, want)
					}
				default: // overlap queries
					p, n := randRange()
					got := tb.overlapLocked(p, n)
					if want := m.overlaps(p, n); (got != nil) != want || (got != nil && (got.base >= p+n || got.end() <= p)) {
						t.Fatalf("op %d: overlapLocked(%#x, %d) = %v, model overlaps: %v", op, p, n, got, want)
					}
				}
				if op%97 == 0 {
					checkTreap(t, tb)
				}
			}
			checkTreap(t, tb)
			want := make([]*region, 0, len(m))
			for _, r := range m {
				want = append(want, r)
			}
			slices.SortFunc(want, func(a, b *region) int { return cmp.Compare(a.base, b.base) })
			got := tb.drain()
			if !slices.Equal(got, want) {
				t.Fatalf("drain returned %d regions, model has %d, or in another order", len(got), len(want))
			}
			if tb.root != nil || tb.n != 0 || tb.findLocked(want[0].base) != nil {
				t.Fatal("table not empty after drain")
			}
			if tb.insertLocked(&region{base: 1, size: 1}) {
				t.Fatal("insertLocked accepted a region after drain")
			}
		})
	}
}

// TestTableDepth checks that lookups stay O(log n) for the address orders
// a program produces: mmap hands out addresses top-down, one after the
// other, which would make a plain search tree a list. 100,000 regions
// inserted in falling, rising and random order, and half then removed,
// keep the tree within 4 log2(n) (a treap's expected height is about
// 3 log2(n)): the number of regions a lookup visits, whatever its time.
func TestTableDepth(t *testing.T) {
	const n = 100_000
	const gran = 2 << 20
	for _, order := range []string{"falling", "rising", "random"} {
		t.Run(order, func(t *testing.T) {
			idx := make([]uint64, n)
			for i := range idx {
				idx[i] = uint64(i)
			}
			switch order {
			case "falling":
				slices.Reverse(idx)
			case "random":
				rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
			}
			tb := newTable()
			regs := make([]*region, n)
			for i, k := range idx {
				regs[i] = &region{base: 0x7f0000000000 - k*gran, size: gran}
				tb.insertLocked(regs[i])
			}
			limit := func(n int) int { return 4 * bits.Len(uint(n)) }
			if h := checkTreap(t, tb); h > limit(n) {
				t.Errorf("height %d with %d regions, want at most %d", h, n, limit(n))
			}
			for _, r := range regs[:n/2] {
				tb.removeLocked(r)
			}
			if h := checkTreap(t, tb); h > limit(n/2) {
				t.Errorf("height %d with %d regions after removals, want at most %d", h, n/2, limit(n/2))
			}
		})
	}
}

// sliceTable is the table before the treap (up to 4923b36), kept as the
// benchmarks' baseline: regions sorted by base in a slice, found by binary
// search, inserted with slices.Insert and removed after slices.Index.
type sliceTable struct{ regs []*region }

func (t *sliceTable) search(p uint64) (int, bool) {
	return slices.BinarySearchFunc(t.regs, p, func(r *region, p uint64) int {
		switch {
		case r.base > p:
			return 1
		case r.base == p:
			return 0
		}
		return -1
	})
}

func (t *sliceTable) findLocked(p uint64) *region {
	i, found := t.search(p)
	if found {
		return t.regs[i]
	}
	if i > 0 && p < t.regs[i-1].end() {
		return t.regs[i-1]
	}
	return nil
}

func (t *sliceTable) insertLocked(r *region) bool {
	i, _ := t.search(r.base)
	t.regs = slices.Insert(t.regs, i, r)
	return true
}

func (t *sliceTable) removeLocked(r *region) {
	i := slices.Index(t.regs, r)
	if i < 0 {
		return
	}
	t.regs = slices.Delete(t.regs, i, i+1)
	r.dead = true
}

type regionTable interface {
	findLocked(p uint64) *region
	insertLocked(r *region) bool
	removeLocked(r *region)
}

// BenchmarkTable times the table's work for one AddressReserve, one
// lookup (a MemMap, SetAccess or copy check) and one AddressFree with
// 1,000, 10,000 and 100,000 regions live, for the treap and for the
// sorted slice it replaced, side by side in one run. The live regions are
// laid out as mmap places them (top-down, 2 MiB apart); each iteration
// inserts a region among them at a random place, finds it and removes it.
func BenchmarkTable(b *testing.B) {
	const gran = 2 << 20
	for _, live := range []int{1_000, 10_000, 100_000} {
		for _, impl := range []string{"treap", "slice"} {
			b.Run(fmt.Sprintf("live=%d/%s", live, impl), func(b *testing.B) {
				var tb regionTable = newTable()
				if impl == "slice" {
					tb = &sliceTable{}
				}
				top := uint64(0x7f0000000000)
				for i := range live {
					tb.insertLocked(&region{base: top - uint64(i)*2*gran, size: gran})
				}
				rng := rand.New(rand.NewPCG(1, 2))
				spare := make([]region, 1024)
				for i := range spare {
					spare[i] = region{base: top - uint64(rng.IntN(live))*2*gran + gran, size: gran} // in a gap
				}
				i := 0
				for b.Loop() {
					r := &spare[i%len(spare)]
					i++
					r.dead = false
					tb.insertLocked(r)
					if tb.findLocked(r.base+gran/2) != r {
						b.Fatal("lookup missed the region just inserted")
					}
					tb.removeLocked(r)
				}
			})
		}
	}
}
