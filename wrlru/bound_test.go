package wrlru

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// 16 goroutines insert distinct keys while a watcher counts the resident
// entries (every shard locked at once) and fails on any count above the
// bound; at the end exactly MaxSize entries remain.
func TestBoundExactWhileSharded(t *testing.T) {
	for _, shards := range []int{1, 8, MaxShards} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			withProcs(t, func(t *testing.T) {
				const bound, goroutines, perG = 64, 16, 300
				c := mustNew(t, func(_ context.Context, o *obj, a int) (int, error) { return o.id + a, nil }, Options{MaxSize: bound, Shards: shards})

				objs := newObjs(goroutines * perG / 4) // kept alive throughout
				done := make(chan struct{})
				watcher := make(chan int)
				go func() {
					peak := 0
					for {
						select {
						case <-done:
							watcher <- peak
							return
						default:
						}
						n := resident(c)
						if n > bound {
							t.Errorf("%d entries resident, bound %d", n, bound)
						}
						peak = max(peak, n)
						runtime.Gosched()
					}
				}()
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						for i := range perG {
							k := g*perG + i
							c.Get(context.Background(), objs[k/4], k%4)
						}
					})
				}
				wg.Wait()
				close(done)
				peak := <-watcher
				if n := resident(c); n != bound {
					t.Fatalf("end: %d entries, want exactly %d", n, bound)
				}
				if n := c.budget.Len(); n != bound {
					t.Fatalf("budget count %d, want %d", n, bound)
				}
				t.Logf("peak seen by the watcher: %d", peak)
				runtime.KeepAlive(objs)
			})
		})
	}
}

// Caches sharing a Budget evict across each other in LRU order, and the
// family never exceeds the budget.
func TestBudgetSharedLRU(t *testing.T) {
	b, err := NewBudget(BudgetOptions{MaxSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	ca := mustNew(t, func(_ context.Context, _ *obj, a int) (int, error) { return a, nil }, Options{Budget: b, Shards: 1})
	cb := mustNew(t, func(_ context.Context, _ *obj, s string) (string, error) { return s, nil }, Options{Budget: b, Shards: 1})
	ctx := context.Background()
	o := &obj{}
	for i := range 10 {
		ca.Get(ctx, o, i)
	}
	// Touch 0..2: now 3..9 are the oldest.
	for i := range 3 {
		ca.Get(ctx, o, i)
	}
	for i := range 5 {
		cb.Get(ctx, o, fmt.Sprint(i))
	}
	var left []int
	for _, k := range ca.Keys() {
		left = append(left, k.Args)
	}
	slices.Sort(left)
	if !slices.Equal(left, []int{0, 1, 2, 8, 9}) {
		t.Fatalf("cache A keeps %v, want [0 1 2 8 9] (3..7 least recently used)", left)
	}
	if na, nb := ca.Info().CurrSize, cb.Info().CurrSize; na+nb != 10 || nb != 5 {
		t.Fatalf("A %d + B %d entries, want 5 + 5", na, nb)
	}
	if b.Len() != 10 || ca.Info().MaxSize != 10 {
		t.Fatalf("budget len %d, maxsize %d", b.Len(), ca.Info().MaxSize)
	}
	// B's entries are now the oldest but for A's 0..2 touched before them.
	for i := 10; i < 14; i++ {
		ca.Get(ctx, o, i)
	}
	if n := cb.Info().CurrSize; n != 5 {
		t.Fatalf("B lost entries (%d left) while A had older ones", n)
	}
}

// Many goroutines on several caches of one budget: the family stays within
// it at every instant.
func TestBudgetBoundConcurrent(t *testing.T) {
	withProcs(t, func(t *testing.T) {
		const max = 32
		b, _ := NewBudget(BudgetOptions{MaxSize: max})
		caches := make([]*Cache[obj, int, int], 3)
		for i := range caches {
			caches[i] = mustNew(t, func(_ context.Context, o *obj, a int) (int, error) { return a, nil }, Options{Budget: b, Shards: 4})
		}
		objs := newObjs(64)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		watch := make(chan struct{})
		go func() {
			defer close(watch)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if n := familyCount(caches); n > max {
					t.Errorf("%d entries in the family, budget %d", n, max)
				}
				runtime.Gosched()
			}
		}()
		for g := range 12 {
			wg.Go(func() {
				c := caches[g%3]
				for i := range 400 {
					c.Get(context.Background(), objs[(g*7+i)%64], i%16)
				}
			})
		}
		wg.Wait()
		close(stop)
		<-watch
		total := 0
		for _, c := range caches {
			total += resident(c)
		}
		if total != max || b.Len() != max {
			t.Fatalf("end: %d entries, budget count %d, want %d", total, b.Len(), max)
		}
		runtime.KeepAlive(objs)
	})
}

// A member cache that is dropped gives its slots back.
func TestBudgetDroppedMember(t *testing.T) {
	b, _ := NewBudget(BudgetOptions{MaxSize: 8})
	keep := mustNew(t, func(_ context.Context, _ *obj, a int) (int, error) { return a, nil }, Options{Budget: b})
	drop := mustNew(t, func(_ context.Context, _ *obj, a int) (int, error) { return a, nil }, Options{Budget: b})
	ctx := context.Background()
	o := &obj{}
	for i := range 8 {
		drop.Get(ctx, o, i)
	}
	drop = nil
	gcUntil(t, "the dropped member's slots back", func() bool { return b.Len() == 0 })
	for i := range 8 {
		keep.Get(ctx, o, i)
	}
	if n := keep.Info().CurrSize; n != 8 {
		t.Fatalf("kept cache holds %d, want 8", n)
	}
	runtime.KeepAlive(o)
}

// familyCount locks every shard of every cache, in order, and sums.
func familyCount(caches []*Cache[obj, int, int]) int {
	for _, c := range caches {
		for _, s := range c.shards {
			s.mu.Lock()
		}
	}
	n := 0
	for _, c := range caches {
		for _, s := range c.shards {
			n += len(s.m)
		}
	}
	for _, c := range caches {
		for _, s := range c.shards {
			s.mu.Unlock()
		}
	}
	return n
}
