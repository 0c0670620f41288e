package wrlru

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// deadlockTimeout bounds how long a call that must return may block before
// the test calls it a deadlock. It is no timing assertion: the calls return
// at once when correct, and the bound only turns a hang into a failure.
const deadlockTimeout = 10 * time.Second

// within runs f on its own goroutine and fails the test if f has not
// returned after deadlockTimeout. A panic in f is returned, not raised.
func within(t *testing.T, what string, f func()) (panicked any) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		ok := false
		defer func() {
			if !ok {
				done <- recover()
			}
		}()
		f()
		ok = true
		done <- nil
	}()
	select {
	case p := <-done:
		return p
	case <-time.After(deadlockTimeout):
		t.Fatalf("%s did not return within %v: deadlock", what, deadlockTimeout)
		return nil
	}
}

// recovered runs f and returns what it panicked with, nil if it returned.
func recovered(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// ukey is an argument type that is comparable to the compiler but holds an
// interface: with a slice in it, hashing it (any map operation) panics.
type ukey struct{ X any }

// inflight counts the computations registered in c's shards.
func inflight[T any, A comparable, V any](c *Cache[T, A, V]) int {
	n := 0
	for _, s := range c.shards {
		s.mu.Lock()
		n += len(s.inflight)
		s.mu.Unlock()
	}
	return n
}

// JAX testCrashingKey: a key whose hash panics must not leave the shard
// locked. The shard is empty first (no read view: the key is first hashed
// under the shard's lock), then holds an entry (the key is first hashed
// lock-free), then has an entry newer than its read view.
func TestUnhashableKeyReleasesLock(t *testing.T) {
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			c := mustNew(t, func(_ context.Context, o *obj, k ukey) (int, error) {
				return o.id*100 + k.X.(int), nil
			}, Options{Shards: shards})

			ctx := context.Background()
			o := &obj{id: 3}
			bad := ukey{[]int{1}}
			badGet := func(step string) {
				t.Helper()
				p := within(t, step+": Get with an unhashable key", func() { c.Get(ctx, o, bad) })
				if p == nil || !strings.Contains(fmt.Sprint(p), "unhashable") {
					t.Fatalf("%s: Get with an unhashable key recovered %v, want the runtime's unhashable panic", step, p)
				}
			}
			goodGet := func(step string, a, want int) {
				t.Helper()
				var v int
				var err error
				if p := within(t, step+": Get", func() { v, err = c.Get(ctx, o, ukey{a}) }); p != nil {
					t.Fatalf("%s: Get panicked: %v", step, p)
				}
				if err != nil || v != want {
					t.Fatalf("%s: Get(%d) = %d, %v; want %d", step, a, v, err, want)
				}
			}

			badGet("empty shard")
			goodGet("after the panic on an empty shard", 1, 301) // a miss: write lock
			goodGet("hit", 1, 301)
			goodGet("hit from the read view", 1, 301)
			badGet("shard with a read view")
			goodGet("miss beside a read view", 2, 302) // newer than the view
			badGet("entry newer than the read view")
			goodGet("hit under the read lock", 2, 302)

			within(t, "Keys", func() {
				if n := len(c.Keys()); n != 2 {
					t.Errorf("Keys: %d keys, want 2", n)
				}
			})
			within(t, "Info", func() {
				// The panicking lookups neither hit nor computed.
				if inf := c.Info(); inf.Misses != 2 || inf.Hits != 3 || inf.CurrSize != 2 {
					t.Errorf("Info %v, want hits=3 misses=2 currsize=2", inf)
				}
			})
			within(t, "Evict", func() { c.Evict(o) })
			within(t, "Clear", c.Clear)
			if n := inflight(c); n != 0 {
				t.Fatalf("%d computations left in flight", n)
			}
		})
	}
}

// panicCtx is a caller's context whose Err panics once armed: user code the
// cache calls after fn returned, while the computation is still registered.
type panicCtx struct {
	context.Context
	armed *bool
}

func (c panicCtx) Err() error {
	if *c.armed {
		panic("panicCtx.Err")
	}
	return nil
}

// A panic in the caller's context after fn returned must still release the
// computation: its waiters and later callers of the key must not hang.
func TestCallerContextPanicReleasesComputation(t *testing.T) {
	boom := errors.New("boom")
	armed := false
	c := mustNew(t, func(context.Context, *obj, int) (int, error) {
		armed = true
		return 0, boom
	}, Options{})

	o := &obj{}
	p := within(t, "Get with a panicking context", func() {
		c.Get(panicCtx{context.Background(), &armed}, o, 1)
	})
	if p != "panicCtx.Err" {
		t.Fatalf("recovered %v, want the context's panic", p)
	}
	if n := inflight(c); n != 0 {
		t.Fatalf("%d computations left in flight", n)
	}
	armed = false
	within(t, "Get after the panic", func() {
		if _, err := c.Get(context.Background(), o, 1); !errors.Is(err, boom) {
			t.Errorf("Get after the panic: err = %v, want a fresh computation's boom", err)
		}
	})
}

// A key that is not equal to itself (a NaN in it) can never be found again:
// it is computed on every call and never cached or registered, so it leaves
// no entry that nothing can remove and no computation in flight.
func TestSelfUnequalKeyNotCached(t *testing.T) {
	calls := 0
	c := mustNew(t, func(_ context.Context, _ *obj, x float64) (int, error) { calls++; return calls, nil }, Options{Shards: 1})
	ctx := context.Background()
	o := &obj{}
	for i := 1; i <= 3; i++ {
		if v, err := c.Get(ctx, o, math.NaN()); err != nil || v != i {
			t.Fatalf("Get(NaN) #%d = %d, %v; want a computation's %d", i, v, err, i)
		}
	}
	if inf := c.Info(); inf.CurrSize != 0 || inf.Misses != 3 || inf.Hits != 0 {
		t.Fatalf("Info %v, want hits=0 misses=3 currsize=0", inf)
	}
	if n := resident(c); n != 0 {
		t.Fatalf("%d entries for a NaN key", n)
	}
	if n := inflight(c); n != 0 {
		t.Fatalf("%d computations left in flight", n)
	}
	if n := c.budget.Len(); n != 0 {
		t.Fatalf("budget holds %d slots", n)
	}
	if v, err := c.Get(ctx, o, 1); err != nil || v != 4 {
		t.Fatalf("Get(1) = %d, %v", v, err)
	}
	if v, err := c.Get(ctx, o, 1); err != nil || v != 4 {
		t.Fatalf("Get(1) again = %d, %v; want the cached 4", v, err)
	}
}

// A panicking fn: the computing caller gets the panic, its waiters
// ErrPanicked; nothing is cached and no computation stays registered, so
// the next caller computes afresh.
func TestPanickingFnLeavesNoComputation(t *testing.T) {
	f := newBlockingFn()
	fail := true
	c := mustNew(t, func(ctx context.Context, o *obj, a int) (int, error) {
		v, err := f.fn(ctx, o, a)
		if fail {
			panic("fn failed")
		}
		return v, err
	}, Options{})

	o := &obj{}
	ctx := context.Background()
	leader := make(chan any)
	go func() { leader <- recovered(func() { c.Get(ctx, o, 1) }) }()
	<-f.started
	waiter := make(chan error)
	go func() { _, err := c.Get(ctx, o, 1); waiter <- err }()
	waitMisses(c, 2)
	f.release <- struct{}{}
	if p := <-leader; p != "fn failed" {
		t.Fatalf("leader recovered %v, want the panic", p)
	}
	if err := <-waiter; !errors.Is(err, ErrPanicked) {
		t.Fatalf("waiter err = %v, want ErrPanicked", err)
	}
	if n := inflight(c); n != 0 {
		t.Fatalf("%d computations left in flight", n)
	}
	if inf := c.Info(); inf.CurrSize != 0 || c.budget.Len() != 0 {
		t.Fatalf("Info %v, budget %d after a panic: want nothing cached", inf, c.budget.Len())
	}
	fail = false
	close(f.release)
	if v, err := c.Get(ctx, o, 1); err != nil || v != 10 {
		t.Fatalf("Get after the panic = %d, %v; want a fresh 10", v, err)
	}
}

// JAX: Evict and Clear drop a computation in flight from the cache: its
// result still reaches its caller and waiters but is not inserted, and a
// Get after the Evict or Clear computes afresh rather than joining it.
func TestEvictAndClearDuringComputation(t *testing.T) {
	for _, op := range []string{"Evict", "Clear"} {
		t.Run(op, func(t *testing.T) {
			b, err := NewBudget(BudgetOptions{MaxSize: 16})
			if err != nil {
				t.Fatal(err)
			}
			f := newBlockingFn()
			c := mustNew(t, f.fn, Options{Budget: b})
			ctx := context.Background()
			o := &obj{}
			type result struct {
				v   int
				err error
			}
			res := make(chan result, 3)
			get := func() { v, err := c.Get(ctx, o, 2); res <- result{v, err} }
			go get()
			<-f.started
			go get() // a waiter of the first computation
			waitMisses(c, 2)
			if op == "Evict" {
				if err := c.Evict(o); err != nil {
					t.Fatal(err)
				}
			} else {
				c.Clear()
			}
			go get() // after Evict/Clear: a computation of its own
			select {
			case <-f.started:
			case <-time.After(deadlockTimeout):
				t.Fatalf("a Get after %s joined the dropped computation instead of computing", op)
			}
			f.release <- struct{}{}
			f.release <- struct{}{}
			for range 3 {
				if r := <-res; r.err != nil || r.v != 20 {
					t.Fatalf("Get = %d, %v; want 20", r.v, r.err)
				}
			}
			// Only the computation started after Evict/Clear is cached.
			if n := resident(c); n != 1 {
				t.Fatalf("%d entries, want the second computation's 1", n)
			}
			if n := b.Len(); n != 1 {
				t.Fatalf("budget holds %d slots, want 1", n)
			}
			if n := inflight(c); n != 0 {
				t.Fatalf("%d computations left in flight", n)
			}
		})
	}
	// The dropped computation alone: nothing cached, its slot given back.
	for _, op := range []string{"Evict", "Clear"} {
		t.Run(op+"/alone", func(t *testing.T) {
			b, err := NewBudget(BudgetOptions{MaxSize: 16})
			if err != nil {
				t.Fatal(err)
			}
			f := newBlockingFn()
			c := mustNew(t, f.fn, Options{Budget: b})
			o := &obj{}
			done := make(chan int)
			go func() { v, _ := c.Get(context.Background(), o, 4); done <- v }()
			<-f.started
			if op == "Evict" {
				c.Evict(o)
			} else {
				c.Clear()
			}
			close(f.release)
			if v := <-done; v != 40 {
				t.Fatalf("Get = %d, want 40", v)
			}
			if inf := c.Info(); inf.CurrSize != 0 || len(c.Keys()) != 0 || b.Len() != 0 {
				t.Fatalf("after %s during the computation: Info %v, %d keys, budget %d; want nothing cached",
					op, inf, len(c.Keys()), b.Len())
			}
			go func() { <-f.started }()
			if v, _ := c.Get(context.Background(), o, 4); v != 40 || f.calls.Load() != 2 {
				t.Fatalf("Get = %d after %d calls, want a recomputed 40", v, f.calls.Load())
			}
		})
	}
}

// Get, Evict, Clear, Keys and Info race with unhashable keys and panicking
// and slow computations; afterwards the cache is consistent and usable.
func TestStressPanicsEvictClear(t *testing.T) {
	withProcs(t, func(t *testing.T) {
		b, err := NewBudget(BudgetOptions{MaxSize: 40})
		if err != nil {
			t.Fatal(err)
		}
		c := mustNew(t, func(_ context.Context, o *obj, k ukey) (int, error) {
			switch x := k.X.(type) {
			case string:
				runtime.Gosched()
				panic(x)
			case int:
				if x%3 == 0 {
					runtime.Gosched()
				}
				return o.id*100 + x, nil
			}
			return 0, fmt.Errorf("unexpected argument %v", k.X)
		}, Options{Budget: b, Shards: 4})

		objs := newObjs(6)
		const goroutines, ops = 8, 2000
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 23))
				for range ops {
					o := objs[r.IntN(len(objs))]
					switch p := r.IntN(100); {
					case p < 70:
						x := r.IntN(12)
						v, err := c.Get(context.Background(), o, ukey{x})
						if err != nil || v != o.id*100+x {
							t.Errorf("Get(%d, %d) = %d, %v", o.id, x, v, err)
							return
						}
					case p < 78:
						p := recovered(func() { c.Get(context.Background(), o, ukey{[]int{p}}) })
						if p == nil || !strings.Contains(fmt.Sprint(p), "unhashable") {
							t.Errorf("unhashable key: recovered %v", p)
							return
						}
					case p < 86:
						var err error
						p := recovered(func() { _, err = c.Get(context.Background(), o, ukey{"panic"}) })
						// The computing caller panics; a waiter gets ErrPanicked.
						if p != "panic" && !errors.Is(err, ErrPanicked) {
							t.Errorf("panicking fn: recovered %v, err %v", p, err)
							return
						}
					case p < 92:
						c.Evict(o)
					case p < 94:
						c.Clear()
					case p < 97:
						c.Keys()
					default:
						// Info reads the shards one after another, so only
						// the budget's count is bounded at every instant.
						c.Info()
						if n := b.Len(); n > 40 {
							t.Errorf("budget holds %d, above its bound 40", n)
							return
						}
					}
				}
			})
		}
		if within(t, "the stress goroutines", wg.Wait) != nil {
			t.Fatal("wg.Wait panicked")
		}
		if n := inflight(c); n != 0 {
			t.Fatalf("%d computations left in flight", n)
		}
		if n, inf := resident(c), c.Info(); n != inf.CurrSize || n != b.Len() || n > 40 {
			t.Fatalf("%d entries, Info %v, budget %d: want all equal and at most 40", n, inf, b.Len())
		}
		for _, o := range objs {
			if v, err := c.Get(context.Background(), o, ukey{1}); err != nil || v != o.id*100+1 {
				t.Fatalf("Get after the stress = %d, %v", v, err)
			}
		}
	})
}
