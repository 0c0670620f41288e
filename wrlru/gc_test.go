package wrlru

import (
	"context"
	"runtime"
	"testing"
	"weak"
)

// JAX testGCKeys: drop half the objects; their entries go, the others stay.
func TestGCKeys(t *testing.T) {
	calls := 0
	c := mustNew(t, func(_ context.Context, o *obj, a int) (int, error) { calls++; return o.id + a, nil }, Options{})
	ctx := context.Background()
	objs := newObjs(10)
	for i, o := range objs {
		c.Get(ctx, o, i)
	}
	for i := 0; i < len(objs); i += 2 {
		objs[i] = nil
	}
	gcUntil(t, "entries of the dropped objects gone", func() bool { return c.Info().CurrSize == 5 })
	for i, o := range objs {
		if o == nil {
			continue
		}
		if v, err := c.Get(ctx, o, i); err != nil || v != 2*i {
			t.Fatalf("Get(%d) = %d, %v", i, v, err)
		}
	}
	if calls != 10 {
		t.Fatalf("fn ran %d times, want 10: a live object's entry was dropped", calls)
	}
	runtime.KeepAlive(objs)
}

// bigValue is large enough to be its own allocation (no tiny-alloc batching),
// so a weak pointer to it reports its own collection.
type bigValue struct{ _ [64]byte }

// Values are released when their object dies, and every entry of an object
// with many goes with it.
func TestValuesReleasedWithObject(t *testing.T) {
	c := mustNew(t, func(_ context.Context, _ *obj, a int) (*bigValue, error) { return &bigValue{}, nil }, Options{MaxSize: Unbounded})
	ctx := context.Background()
	o := &obj{}
	const n = 1000
	var wv []weak.Pointer[bigValue]
	for a := range n {
		v, err := c.Get(ctx, o, a)
		if err != nil {
			t.Fatal(err)
		}
		wv = append(wv, weak.Make(v))
	}
	other := &obj{id: 1}
	c.Get(ctx, other, 0)
	if got := c.Info().CurrSize; got != n+1 {
		t.Fatalf("currsize %d, want %d", got, n+1)
	}
	o = nil
	gcUntil(t, "the object's entries gone", func() bool { return resident(c) == 1 })
	gcUntil(t, "the object's values collected", func() bool {
		for _, w := range wv {
			if w.Value() != nil {
				return false
			}
		}
		return true
	})
	if _, err := c.Get(ctx, other, 0); err != nil || c.Info().Hits != 1 {
		t.Fatalf("the other object's entry was lost: %v %v", err, c.Info())
	}
	runtime.KeepAlive(o)
}

// A dropped cache is collected while its key objects live; their cleanups,
// when they run later, find it gone and do nothing.
func TestDroppedCacheCollected(t *testing.T) {
	ctx := context.Background()
	objs := newObjs(20)
	fn := func(_ context.Context, o *obj, a int) (int, error) { return o.id + a, nil }
	dropped := mustNew(t, fn, Options{})
	// witness shares the objects: its entries going shows their cleanups ran.
	witness := mustNew(t, fn, Options{})
	for _, o := range objs {
		dropped.Get(ctx, o, 1)
		witness.Get(ctx, o, 1)
	}
	wc := weak.Make(dropped)
	dropped = nil
	gcUntil(t, "the dropped cache collected", func() bool { return wc.Value() == nil })
	for _, o := range objs {
		if v, err := witness.Get(ctx, o, 1); err != nil || v != o.id+1 {
			t.Fatalf("witness Get = %d, %v", v, err)
		}
	}
	objs = nil
	gcUntil(t, "the objects' cleanups ran", func() bool { return witness.Info().CurrSize == 0 })
	runtime.KeepAlive(objs)
}

// Leak test: 100k objects with entries come and go; the cache and the heap
// return to the baseline.
func TestNoLeak(t *testing.T) {
	const n = 100_000
	// slack covers allocator and runtime noise; the workload peaks at tens
	// of MiB, so a leak of its entries would exceed it many times over.
	const slack = 2 << 20
	c := mustNew(t, func(_ context.Context, o *obj, a int) (int, error) { return o.id + a, nil }, Options{MaxSize: Unbounded})
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	func() {
		objs := newObjs(n)
		for i, o := range objs {
			if _, err := c.Get(ctx, o, i%4); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.Info().CurrSize; got != n {
			t.Fatalf("currsize %d, want %d", got, n)
		}
		runtime.KeepAlive(objs)
	}()
	gcUntil(t, "every entry gone", func() bool { return resident(c) == 0 })
	for _, s := range c.shards {
		s.mu.RLock()
		objs, heapLen := len(s.objs), len(s.heap)
		s.mu.RUnlock()
		if objs != 0 || heapLen != 0 {
			t.Fatalf("shard keeps %d object records, %d heap slots", objs, heapLen)
		}
	}
	after := heap()
	t.Logf("heap: baseline %d B, after %d B", base, after)
	if after > base+slack {
		t.Fatalf("heap %d B after the objects died, baseline %d B (+%d slack)", after, base, slack)
	}
	runtime.KeepAlive(c)
}

// An address reused by a new object after the old one died (before or after
// its cleanup) never answers with the old object's value.
func TestAddressReuse(t *testing.T) {
	c := mustNew(t, func(_ context.Context, o *obj, a int) (int, error) { return o.id, nil }, Options{MaxSize: Unbounded})
	ctx := context.Background()
	seen := map[uintptr]int{}
	reused := 0
	for i := range 20_000 {
		o := &obj{id: i}
		addr := uintptr(unsafePointer(o))
		if _, ok := seen[addr]; ok {
			reused++
		}
		seen[addr] = i
		if v, err := c.Get(ctx, o, 0); err != nil || v != i {
			t.Fatalf("object %d at a reused address got %d, %v", i, v, err)
		}
		if i%1000 == 0 {
			runtime.GC()
		}
	}
	t.Logf("%d of 20000 objects reused an address", reused)
}

// A cleanup and Evict never wait for a computation in progress, even one on
// the same shard (one shard here) or the same object.
func TestCleanupDoesNotWaitForComputation(t *testing.T) {
	f := newBlockingFn()
	c := mustNew(t, func(ctx context.Context, o *obj, a int) (int, error) {
		if a == 0 {
			return f.fn(ctx, o, a)
		}
		return a, nil
	}, Options{Shards: 1})

	ctx := context.Background()
	busy := &obj{id: 1}
	done := make(chan error)
	go func() { _, err := c.Get(ctx, busy, 0); done <- err }()
	<-f.started // the computation for (busy, 0) is now blocked inside fn

	doomed := &obj{id: 2}
	c.Get(ctx, doomed, 1)
	c.Get(ctx, busy, 1)
	if err := c.Evict(busy); err != nil { // returns while busy's computation runs
		t.Fatal(err)
	}
	if n := resident(c); n != 1 {
		t.Fatalf("%d entries after Evict, want doomed's 1", n)
	}
	doomed = nil
	gcUntil(t, "doomed's entry gone while a computation blocks", func() bool { return resident(c) == 0 })
	close(f.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Evict dropped the computation in flight too: its result is not cached.
	if n := resident(c); n != 0 {
		t.Fatalf("%d entries after the computation, want 0", n)
	}
	runtime.KeepAlive(doomed)
}
