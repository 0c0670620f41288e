package wrlru

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func mustNew[T any, A comparable, V any](t testing.TB, fn func(context.Context, *T, A) (V, error), opts Options) *Cache[T, A, V] {
	t.Helper()
	c, err := New(fn, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewOptions(t *testing.T) {
	b, err := NewBudget(BudgetOptions{MaxSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, *obj, int) (int, error) { return 0, nil }
	tests := []struct {
		name       string
		opts       Options
		wantErr    string // a part of the error naming the field; "" for success
		wantMax    int
		wantShards int
	}{
		{"defaults", Options{}, "", DefaultMaxSize, -1},
		{"unbounded", Options{MaxSize: Unbounded}, "", 0, -1},
		{"small bound is one shard", Options{MaxSize: 50}, "", 50, 1},
		{"shards rounded up", Options{Shards: 3}, "", DefaultMaxSize, 4},
		{"one shard", Options{Shards: 1}, "", DefaultMaxSize, 1},
		{"max shards", Options{Shards: MaxShards}, "", DefaultMaxSize, MaxShards},
		{"budget", Options{Budget: b}, "", 8, 1},
		{"nil budget is a private bound", Options{Budget: nil, Shards: 1}, "", DefaultMaxSize, 1},
		{"negative size", Options{MaxSize: -2}, "Options.MaxSize -2: want 0 (DefaultMaxSize), a positive bound, or Unbounded (-1)", 0, 0},
		{"too many shards", Options{Shards: MaxShards + 1}, "Options.Shards 65: want 1 to 64, or 0 for the default", 0, 0},
		{"negative shards", Options{Shards: -2}, "Options.Shards -2", 0, 0},
		{"budget and size", Options{Budget: b, MaxSize: 4}, "Options.MaxSize 4 with Options.Budget", 0, 0},
		{"budget and unbounded", Options{Budget: b, MaxSize: Unbounded}, "Options.MaxSize -1 with Options.Budget", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(fn, tt.opts)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New(%+v): err = %v, want ErrInvalidOption saying %q", tt.opts, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Info().MaxSize; got != tt.wantMax {
				t.Errorf("MaxSize = %d, want %d", got, tt.wantMax)
			}
			if tt.wantShards > 0 && len(c.shards) != tt.wantShards {
				t.Errorf("shards = %d, want %d", len(c.shards), tt.wantShards)
			}
			if shared := c.budget == b; shared != (tt.opts.Budget != nil) {
				t.Errorf("cache uses the given budget: %v, want %v", shared, tt.opts.Budget != nil)
			}
			if wantExact := len(c.shards) == 1 && tt.opts.Budget == nil; c.exact != wantExact {
				t.Errorf("exact = %v, want %v", c.exact, wantExact)
			}
		})
	}
	if _, err := New[obj, int, int](nil, Options{}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("New(nil fn): err = %v, want ErrInvalidOption", err)
	}
	if _, err := New(func(context.Context, *struct{}, int) (int, error) { return 0, nil }, Options{}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("New with zero-size key type: err = %v, want ErrInvalidOption", err)
	}
	if _, err := NewBudget(BudgetOptions{MaxSize: -2}); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "BudgetOptions.MaxSize -2") {
		t.Errorf("NewBudget(BudgetOptions{MaxSize: -2}): err = %v, want ErrInvalidOption naming BudgetOptions.MaxSize", err)
	}
}

// TestBudgetOptions: the zero BudgetOptions and Unbounded are both an
// unbounded budget, as NewBudget(0) was; a positive MaxSize is the bound.
func TestBudgetOptions(t *testing.T) {
	for _, tc := range []struct {
		opts BudgetOptions
		want int
	}{
		{BudgetOptions{}, 0},
		{BudgetOptions{MaxSize: Unbounded}, 0},
		{BudgetOptions{MaxSize: 5}, 5},
	} {
		b, err := NewBudget(tc.opts)
		if err != nil {
			t.Errorf("NewBudget(%+v): %v", tc.opts, err)
		} else if b.MaxSize() != tc.want {
			t.Errorf("NewBudget(%+v).MaxSize() = %d, want %d", tc.opts, b.MaxSize(), tc.want)
		}
	}
}

func TestNilObject(t *testing.T) {
	c := mustNew(t, func(context.Context, *obj, int) (int, error) { return 1, nil }, Options{})
	for range 3 {
		if _, err := c.Get(context.Background(), nil, 1); !errors.Is(err, ErrNilObject) {
			t.Fatalf("Get(nil): err = %v, want ErrNilObject", err)
		}
	}
	if err := c.Evict(nil); !errors.Is(err, ErrNilObject) {
		t.Fatalf("Evict(nil): err = %v, want ErrNilObject", err)
	}
	if inf := c.Info(); inf.CurrSize != 0 || inf.Misses != 0 {
		t.Fatalf("Info after nil lookups = %v, want nothing counted", inf)
	}
}

// JAX testKwargsDictOrder: arguments are equal by value, in field order.
func TestArgumentEquality(t *testing.T) {
	type kwargs struct{ K1, K2 string }
	missID := 0
	c := mustNew(t, func(context.Context, *obj, kwargs) (int, error) { missID++; return missID, nil }, Options{MaxSize: 4})
	o := &obj{}
	ctx := context.Background()
	for _, tc := range []struct {
		args kwargs
		want int
	}{
		{kwargs{K1: "a", K2: "b"}, 1},
		{kwargs{K1: "b", K2: "a"}, 2},
		{kwargs{K2: "b", K1: "a"}, 1},
	} {
		if got, err := c.Get(ctx, o, tc.args); err != nil || got != tc.want {
			t.Errorf("Get(%+v) = %d, %v; want %d", tc.args, got, err, tc.want)
		}
	}
	// A different object with equal contents is a different key.
	if got, _ := c.Get(ctx, &obj{}, kwargs{K1: "a", K2: "b"}); got != 3 {
		t.Errorf("Get(other object) = %d, want 3 (a new computation)", got)
	}
}

// JAX testGetKeys.
func TestKeys(t *testing.T) {
	c := mustNew(t, func(_ context.Context, _ *obj, a string) (string, error) { return a + "extra", nil }, Options{MaxSize: 4})
	o := &obj{}
	if k := c.Keys(); len(k) != 0 {
		t.Fatalf("Keys of empty cache = %v", k)
	}
	ctx := context.Background()
	c.Get(ctx, o, "arg1")
	c.Get(ctx, o, "arg2")
	keys := c.Keys()
	if len(keys) != 2 {
		t.Fatalf("Keys = %v, want 2", keys)
	}
	args := []string{keys[0].Args, keys[1].Args}
	slices.Sort(args)
	if !slices.Equal(args, []string{"arg1", "arg2"}) || keys[0].Obj != o || keys[1].Obj != o {
		t.Fatalf("Keys = %v, want (o, arg1) and (o, arg2)", keys)
	}
}

// JAX testPrintingStats.
func TestInfoString(t *testing.T) {
	c := mustNew(t, func(_ context.Context, _ *obj, a int) (int, error) { return a, nil }, Options{})
	o := &obj{}
	ctx := context.Background()
	for i := range 10 {
		c.Get(ctx, o, i)
	}
	for i := range 5 {
		c.Get(ctx, o, i)
	}
	const want = "Cache(hits=5, misses=10, maxsize=2048, currsize=10)"
	if got := c.Info().String(); got != want {
		t.Fatalf("Info = %s, want %s", got, want)
	}
	c.Clear()
	if got := c.Info().String(); got != "Cache(hits=0, misses=0, maxsize=2048, currsize=0)" {
		t.Fatalf("Info after Clear = %s", got)
	}
	c.Get(ctx, o, 1)
	c.Get(ctx, o, 1)
	if got := c.Info(); got.Hits != 1 || got.Misses != 1 || got.CurrSize != 1 {
		t.Fatalf("Info after Clear and two Gets = %v, want hits=1 misses=1 currsize=1", got)
	}
}

// JAX "eviction is LRU": with one shard the victim is exactly the least
// recently used entry.
func TestEvictionIsLRU(t *testing.T) {
	calls := 0
	c := mustNew(t, func(_ context.Context, _ *obj, a int) (int, error) { calls++; return a, nil }, Options{MaxSize: 3, Shards: 1})
	o := &obj{}
	ctx := context.Background()
	get := func(a int) {
		t.Helper()
		if v, err := c.Get(ctx, o, a); err != nil || v != a {
			t.Fatalf("Get(%d) = %d, %v", a, v, err)
		}
	}
	cached := func() []int {
		var out []int
		for _, k := range c.Keys() {
			out = append(out, k.Args)
		}
		slices.Sort(out)
		return out
	}
	get(1)
	get(2)
	get(3)
	get(1) // order now 2, 3, 1
	get(4) // evicts 2
	if got := cached(); !slices.Equal(got, []int{1, 3, 4}) {
		t.Fatalf("after evicting: keys %v, want [1 3 4]", got)
	}
	get(3)
	get(1) // order 4, 3, 1
	get(5) // evicts 4
	if got := cached(); !slices.Equal(got, []int{1, 3, 5}) {
		t.Fatalf("keys %v, want [1 3 5]", got)
	}
	if calls != 5 {
		t.Fatalf("fn ran %d times, want 5", calls)
	}
}

// JAX testRecursiveFunction, and the Go extensions: through another cache,
// through other keys, and from a goroutine the computation started.
func TestRecursive(t *testing.T) {
	ctx := context.Background()
	t.Run("direct", func(t *testing.T) {
		var c *Cache[obj, int, int]
		c = mustNew(t, func(ctx context.Context, o *obj, a int) (int, error) { return c.Get(ctx, o, a) }, Options{})
		if _, err := c.Get(ctx, &obj{}, 1); !errors.Is(err, ErrRecursive) {
			t.Fatalf("err = %v, want ErrRecursive", err)
		}
		if n := c.Info().CurrSize; n != 0 {
			t.Fatalf("currsize = %d after failed computation, want 0", n)
		}
	})
	t.Run("other keys work, a cycle does not", func(t *testing.T) {
		var c *Cache[obj, int, int]
		c = mustNew(t, func(ctx context.Context, o *obj, a int) (int, error) {
			if a == 0 {
				return 100, nil
			}
			v, err := c.Get(ctx, o, a-1)
			return v + 1, err
		}, Options{})

		o := &obj{}
		if v, err := c.Get(ctx, o, 5); err != nil || v != 105 {
			t.Fatalf("chain: %d, %v; want 105", v, err)
		}
		var d *Cache[obj, int, int]
		d = mustNew(t, func(ctx context.Context, o *obj, a int) (int, error) { return d.Get(ctx, o, (a+1)%3) }, Options{})
		if _, err := d.Get(ctx, o, 0); !errors.Is(err, ErrRecursive) {
			t.Fatalf("cycle 0->1->2->0: err = %v, want ErrRecursive", err)
		}
	})
	t.Run("through another cache", func(t *testing.T) {
		var a, b *Cache[obj, int, int]
		a = mustNew(t, func(ctx context.Context, o *obj, x int) (int, error) { return b.Get(ctx, o, x) }, Options{})
		b = mustNew(t, func(ctx context.Context, o *obj, x int) (int, error) { return a.Get(ctx, o, x) }, Options{})
		if _, err := a.Get(ctx, &obj{}, 1); !errors.Is(err, ErrRecursive) {
			t.Fatalf("err = %v, want ErrRecursive", err)
		}
	})
	t.Run("from a goroutine of the computation", func(t *testing.T) {
		var c *Cache[obj, int, int]
		c = mustNew(t, func(ctx context.Context, o *obj, a int) (int, error) {
			errc := make(chan error)
			go func() { _, err := c.Get(ctx, o, a); errc <- err }()
			return 0, <-errc
		}, Options{})

		if _, err := c.Get(ctx, &obj{}, 1); !errors.Is(err, ErrRecursive) {
			t.Fatalf("err = %v, want ErrRecursive", err)
		}
	})
}

// blockingFn is a cache function that blocks until released, counting calls.
type blockingFn struct {
	calls   atomic.Int64
	started chan struct{} // one send per call
	release chan struct{}
	err     error
}

func newBlockingFn() *blockingFn {
	return &blockingFn{started: make(chan struct{}, 64), release: make(chan struct{})}
}

func (f *blockingFn) fn(ctx context.Context, _ *obj, a int) (int, error) {
	f.calls.Add(1)
	f.started <- struct{}{}
	<-f.release
	if f.err != nil {
		return 0, f.err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return a * 10, nil
}

// waitMisses spins (yielding, no timer) until c has counted n misses:
// every caller registers its miss under the shard lock before it waits.
func waitMisses[T any, A comparable, V any](c *Cache[T, A, V], n uint64) {
	for c.Info().Misses < n {
		runtime.Gosched()
	}
}

func TestSingleflight(t *testing.T) {
	withProcs(t, func(t *testing.T) {
		f := newBlockingFn()
		c := mustNew(t, f.fn, Options{})
		o := &obj{}
		const waiters = 8
		type result struct {
			v   int
			err error
		}
		res := make(chan result, waiters+1)
		go func() { v, err := c.Get(context.Background(), o, 7); res <- result{v, err} }()
		<-f.started
		// One waiter gives up through its context while the computation runs.
		cctx, cancel := context.WithCancel(context.Background())
		gaveUp := make(chan error)
		go func() { _, err := c.Get(cctx, o, 7); gaveUp <- err }()
		for range waiters {
			go func() { v, err := c.Get(context.Background(), o, 7); res <- result{v, err} }()
		}
		waitMisses(c, waiters+2)
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: err = %v, want context.Canceled", err)
		}
		close(f.release)
		for range waiters + 1 {
			if r := <-res; r.err != nil || r.v != 70 {
				t.Fatalf("Get = %d, %v; want 70", r.v, r.err)
			}
		}
		if n := f.calls.Load(); n != 1 {
			t.Fatalf("fn ran %d times, want 1", n)
		}
	})
}

func TestErrorsReachWaitersAndAreNotCached(t *testing.T) {
	f := newBlockingFn()
	boom := errors.New("boom")
	f.err = boom
	c := mustNew(t, f.fn, Options{})
	o := &obj{}
	const callers = 5
	errs := make(chan error, callers)
	for range callers {
		go func() { _, err := c.Get(context.Background(), o, 1); errs <- err }()
	}
	<-f.started
	waitMisses(c, callers)
	close(f.release)
	for range callers {
		if err := <-errs; !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("fn ran %d times for concurrent callers, want 1", n)
	}
	if n := c.Info().CurrSize; n != 0 {
		t.Fatalf("error cached: currsize %d", n)
	}
	f.err = nil
	go func() { <-f.started }()
	if v, err := c.Get(context.Background(), o, 1); err != nil || v != 10 {
		t.Fatalf("Get after error = %d, %v; want a fresh computation", v, err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("fn ran %d times, want 2", n)
	}
}

// The computing caller gives up: its context error is not the key's, so a
// waiter whose context is live computes again instead of failing.
func TestLeaderCancelledWaiterRetries(t *testing.T) {
	f := newBlockingFn()
	c := mustNew(t, f.fn, Options{})
	o := &obj{}
	lctx, cancel := context.WithCancel(context.Background())
	leader := make(chan error)
	go func() { _, err := c.Get(lctx, o, 3); leader <- err }()
	<-f.started
	waiter := make(chan int)
	go func() {
		v, err := c.Get(context.Background(), o, 3)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		waiter <- v
	}()
	waitMisses(c, 2)
	cancel()
	f.release <- struct{}{} // the leader's call returns ctx.Err()
	if err := <-leader; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader err = %v, want context.Canceled", err)
	}
	<-f.started // the waiter computes
	close(f.release)
	if v := <-waiter; v != 30 {
		t.Fatalf("waiter got %d, want 30", v)
	}
}

func TestPanicReleasesWaiters(t *testing.T) {
	f := newBlockingFn()
	c := mustNew(t, func(ctx context.Context, o *obj, a int) (int, error) {
		f.fn(ctx, o, a)
		panic("fn failed")
	}, Options{})

	o := &obj{}
	panicked := make(chan any)
	go func() {
		defer func() { panicked <- recover() }()
		c.Get(context.Background(), o, 1)
	}()
	<-f.started
	waiter := make(chan error)
	go func() { _, err := c.Get(context.Background(), o, 1); waiter <- err }()
	waitMisses(c, 2)
	close(f.release)
	if p := <-panicked; p != "fn failed" {
		t.Fatalf("leader recovered %v, want the panic", p)
	}
	if err := <-waiter; !errors.Is(err, ErrPanicked) {
		t.Fatalf("waiter err = %v, want ErrPanicked", err)
	}
}

// JAX testEvictWeakref: Evict drops exactly that object's entries.
func TestEvict(t *testing.T) {
	c := mustNew(t, func(_ context.Context, o *obj, a int) (int, error) { return o.id*100 + a, nil }, Options{MaxSize: Unbounded})
	ctx := context.Background()
	const n = 100
	objs := newObjs(n)
	plan := append(rand.Perm(n), rand.Perm(n)...)
	seen := make([]bool, n)
	live := 0
	for _, i := range plan {
		if !seen[i] {
			seen[i] = true
			for a := range 3 {
				c.Get(ctx, objs[i], a)
			}
			live++
		} else {
			if err := c.Evict(objs[i]); err != nil {
				t.Fatal(err)
			}
			live--
		}
		if got := c.Info().CurrSize; got != 3*live {
			t.Fatalf("currsize %d, want %d", got, 3*live)
		}
	}
	// Evicting an object without entries is a no-op.
	if err := c.Evict(&obj{}); err != nil {
		t.Fatal(err)
	}
	// An evicted object can be cached again.
	if v, _ := c.Get(ctx, objs[5], 1); v != 501 {
		t.Fatalf("Get after Evict = %d", v)
	}
}

// JAX testStressMultiThreaded: 10 goroutines x 1000 operations on a cache of
// 50: lookups (sometimes with fresh objects), Info and Clear mixed.
func TestStress(t *testing.T) {
	withProcs(t, func(t *testing.T) {
		type weakKey struct {
			x int
			_ [3]int64 // padding past the 16-byte tiny allocator: each key dies alone
		}
		c := mustNew(t, func(_ context.Context, k *weakKey, y int) ([2]int, error) { return [2]int{k.x, y}, nil }, Options{MaxSize: 50})
		keys := make([]*weakKey, 10)
		for i := range keys {
			keys[i] = &weakKey{x: i}
		}
		const goroutines, ops = 10, 1000
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 42))
				for range ops {
					switch p := r.Float64(); {
					case p < 0.9:
						k := keys[r.IntN(len(keys))]
						if r.Float64() < 0.1 {
							k = &weakKey{x: k.x} // equal contents, new identity
						}
						y := r.IntN(10)
						if v, err := c.Get(context.Background(), k, y); err != nil || v != [2]int{k.x, y} {
							t.Errorf("Get = %v, %v", v, err)
							return
						}
					case p < 0.95:
						if inf := c.Info(); inf.CurrSize > 50 {
							t.Errorf("Info %v above the bound", inf)
							return
						}
					default:
						c.Clear()
					}
				}
			})
		}
		wg.Wait()
		if n := resident(c); n > 50 {
			t.Fatalf("%d entries, bound 50", n)
		}
	})
}

// JAX testMultiThreaded / testAnotherMultiThreaded: inserts of distinct
// objects race with Info, and many entries for one object.
func TestConcurrentInsertAndInfo(t *testing.T) {
	withProcs(t, func(t *testing.T) {
		c := mustNew(t, func(_ context.Context, _ *obj, y int) (int, error) { return y, nil }, Options{})
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				<-start
				for i := range 500 {
					c.Get(context.Background(), &obj{id: i}, i)
				}
			})
		}
		wg.Go(func() {
			<-start
			for range 500 {
				if inf := c.Info(); inf.CurrSize > DefaultMaxSize {
					t.Errorf("Info %v", inf)
				}
				c.Keys()
			}
		})
		close(start)
		wg.Wait()
	})
}

func ExampleInfo_String() {
	fmt.Println(Info{Hits: 5, Misses: 10, MaxSize: 2048, CurrSize: 10})
	// Output: Cache(hits=5, misses=10, maxsize=2048, currsize=10)
}

// An entry removed after the shard's read view was built (Evict, Clear, LRU
// eviction) is never answered from the view.
func TestReadViewAfterRemoval(t *testing.T) {
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			calls := 0
			c := mustNew(t, func(_ context.Context, _ *obj, a int) (int, error) { calls++; return calls, nil }, Options{MaxSize: 2, Shards: shards})

			ctx := context.Background()
			o := &obj{}
			get := func(a, want int) {
				t.Helper()
				if v, err := c.Get(ctx, o, a); err != nil || v != want {
					t.Fatalf("Get(%d) = %d, %v; want %d", a, v, err, want)
				}
			}
			hitTwice := func(a, want int) { // the second hit is served by the view
				t.Helper()
				get(a, want)
				get(a, want)
				if r := c.shardFor(uintptr(unsafePointer(o))).read.Load(); r == nil || len(*r) == 0 {
					t.Fatal("read view not built after repeated hits")
				}
			}
			get(1, 1)
			hitTwice(1, 1)
			c.Evict(o)
			get(1, 2) // recomputed after Evict
			hitTwice(1, 2)
			c.Clear()
			get(1, 3) // recomputed after Clear
			hitTwice(1, 3)
			get(2, 4)
			get(3, 5) // bound 2: evicts 1
			get(1, 6)
		})
	}
}
