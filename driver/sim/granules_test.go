package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGranulesMatchDense runs random maps, access grants and unmaps of
// granule ranges against a dense slice, checking every query and that a
// chunk exists exactly while one of its granules is mapped.
func TestGranulesMatchDense(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 16))
			const n = 5*chunkGranules + 17 // a partial last chunk
			dense := make([]granule, n)
			var gs granules
			h := &memHandle{}
			span := func() (int, int) {
				a := rng.IntN(n)
				return a, a + 1 + rng.IntN(min(n-a, 1+rng.IntN(3*chunkGranules)))
			}
			for op := range 4000 {
				first, last := span()
				switch rng.IntN(4) {
				case 0:
					for i := first; i < last; i++ {
						dense[i] = granule{h: h}
						gs.set(i, granule{h: h})
					}
				case 1:
					for i := first; i < last; i++ {
						if dense[i].h != nil {
							dense[i].access = true
							gs.set(i, granule{h: gs.at(i).h, access: true})
						}
					}
				case 2:
					for i := first; i < last; i++ {
						dense[i] = granule{}
						gs.set(i, granule{})
					}
				default:
					for _, mapped := range []bool{true, false} {
						want, wantOK := 0, false
						for i := first; i < last; i++ {
							if (dense[i].h != nil) == mapped {
								want, wantOK = i, true
								break
							}
						}
						if got, ok := gs.firstWhere(first, last, mapped); got != want || ok != wantOK {
							t.Fatalf("op %d: firstWhere(%d, %d, %v) = %d, %v; want %d, %v", op, first, last, mapped, got, ok, want, wantOK)
						}
					}
					want := true
					for _, g := range dense[first:last] {
						want = want && g.h != nil && g.access
					}
					if got := gs.accessible(first, last); got != want {
						t.Fatalf("op %d: accessible(%d, %d) = %v, want %v", op, first, last, got, want)
					}
				}
				mapped := 0
				for i, g := range dense {
					if g != gs.at(i) {
						t.Fatalf("op %d: granule %d = %+v, want %+v", op, i, gs.at(i), g)
					}
					if g.h != nil {
						mapped++
					}
					if i%chunkGranules == 0 {
						c := gs.chunks[i/chunkGranules]
						has := false
						for _, g := range dense[i:min(n, i+chunkGranules)] {
							has = has || g.h != nil
						}
						if (c != nil) != has {
							t.Fatalf("op %d: chunk %d present %v, mapped granules in it %v", op, i/chunkGranules, c != nil, has)
						}
					}
				}
				if gs.mapped != mapped {
					t.Fatalf("op %d: mapped = %d, want %d", op, gs.mapped, mapped)
				}
			}
		})
	}
}
