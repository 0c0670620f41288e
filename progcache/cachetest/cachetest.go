// Package cachetest checks a progcache.Cache implementation against the
// contract, in the manner of testing/fstest: Run runs subtests whose
// failures name the rule broken. A cache that is also a progcache.Admin
// (entries, pruning, totals) is checked against that contract too.
package cachetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// Backend describes the cache under test.
type Backend struct {
	// Open returns a fresh, empty cache with the given byte cap (0: no
	// cap), on storage no other Open call shares. Required.
	Open func(t *testing.T, maxBytes int64) progcache.Cache
	// Reopen closes c and opens the same storage again, for persistent
	// backends; nil skips the persistence checks.
	Reopen func(t *testing.T, c progcache.Cache) progcache.Cache
	// Ops is the number of operations per goroutine in the concurrency
	// check; 0 means 1000.
	Ops int
}

// KeyN returns a deterministic key for test number n.
func KeyN(n int) progcache.Key {
	var k progcache.Key
	copy(k[:], fmt.Sprintf("cachetest-key-%08d", n))
	return k
}

// ObjectN returns a deterministic object for key n with code of size bytes.
func ObjectN(n, size int) progcache.Object {
	code := bytes.Repeat([]byte{byte(n), byte(n >> 8), 0x5A}, size/3+1)[:size]
	return progcache.Object{
		Kind: "cubin", Name: fmt.Sprintf("obj%d", n), Code: code,
		Symbols:  map[string]string{"k": fmt.Sprintf("_Z%dkv", n)},
		Metadata: map[string]string{"n": fmt.Sprint(n)},
	}
}

// Run checks the Cache contract.
func Run(t *testing.T, b Backend) {
	ctx := context.Background()
	open := func(t *testing.T, maxBytes int64) progcache.Cache {
		c := b.Open(t, maxBytes)
		t.Cleanup(func() { c.Close() })
		return c
	}
	t.Run("MissOnEmpty", func(t *testing.T) {
		c := open(t, 0)
		if _, ok, err := c.Get(ctx, KeyN(1)); ok || err != nil {
			t.Fatalf("Get on an empty cache = hit %v, err %v; want a miss without error", ok, err)
		}
		if n, err := c.Len(ctx); n != 0 || err != nil {
			t.Fatalf("Len of an empty cache = %d, %v; want 0", n, err)
		}
		if s := c.Stats(); s.Misses != 1 {
			t.Errorf("Stats.Misses = %d after one miss, want 1", s.Misses)
		}
	})
	t.Run("PutGet", func(t *testing.T) {
		c := open(t, 0)
		for i, size := range []int{0, 1, 100, 64 << 10} {
			obj := ObjectN(i, size)
			if err := c.Put(ctx, KeyN(i), obj); err != nil {
				t.Fatalf("Put: %v", err)
			}
			got, ok, err := c.Get(ctx, KeyN(i))
			if !ok || err != nil || !got.Equal(obj) {
				t.Fatalf("Get after Put (code %d bytes) = hit %v, err %v, equal %v; want the object back", size, ok, err, got.Equal(obj))
			}
		}
		if n, _ := c.Len(ctx); n != 4 {
			t.Errorf("Len = %d after 4 puts, want 4", n)
		}
		if s := c.Stats(); s.Hits != 4 || s.Puts != 4 {
			t.Errorf("Stats hits %d puts %d, want 4 and 4", s.Hits, s.Puts)
		}
	})
	t.Run("Overwrite", func(t *testing.T) {
		c := open(t, 0)
		mustPut(t, c, 1, 10)
		if err := c.Put(ctx, KeyN(1), ObjectN(2, 20)); err != nil {
			t.Fatal(err)
		}
		got, ok, _ := c.Get(ctx, KeyN(1))
		if !ok || !got.Equal(ObjectN(2, 20)) {
			t.Fatal("Put over an existing key must replace the object")
		}
		if n, _ := c.Len(ctx); n != 1 {
			t.Errorf("Len = %d after overwrite, want 1", n)
		}
	})
	t.Run("DeleteClear", func(t *testing.T) {
		c := open(t, 0)
		if err := c.Delete(ctx, KeyN(9)); err != nil {
			t.Fatalf("Delete of an absent key must not fail: %v", err)
		}
		for i := range 5 {
			mustPut(t, c, i, 10)
		}
		if err := c.Delete(ctx, KeyN(0)); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, ok, _ := c.Get(ctx, KeyN(0)); ok {
			t.Fatal("Get after Delete must miss")
		}
		if n, _ := c.Len(ctx); n != 4 {
			t.Errorf("Len = %d after a delete, want 4", n)
		}
		if err := c.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := c.Len(ctx); n != 0 {
			t.Errorf("Len = %d after Clear, want 0", n)
		}
		if _, ok, _ := c.Get(ctx, KeyN(1)); ok {
			t.Error("Get after Clear must miss")
		}
	})
	t.Run("TooLarge", func(t *testing.T) {
		c := open(t, 64<<10)
		small := mustPut(t, c, 1, 100)
		err := c.Put(ctx, KeyN(2), ObjectN(2, 128<<10))
		if !errors.Is(err, progcache.ErrTooLarge) {
			t.Fatalf("Put over the byte cap = %v, want ErrTooLarge", err)
		}
		if _, ok, _ := c.Get(ctx, KeyN(2)); ok {
			t.Error("an object over the cap must not be stored")
		}
		if got, ok, _ := c.Get(ctx, KeyN(1)); !ok || !got.Equal(small) {
			t.Error("an object over the cap must evict nothing")
		}
		if s := c.Stats(); s.TooLarge != 1 {
			t.Errorf("Stats.TooLarge = %d, want 1", s.TooLarge)
		}
	})
	t.Run("ByteCap", func(t *testing.T) {
		const capBytes = 64 << 10
		c := open(t, capBytes)
		for i := range 40 {
			if err := c.Put(ctx, KeyN(i), ObjectN(i, 8<<10)); err != nil {
				t.Fatal(err)
			}
		}
		n, _ := c.Len(ctx)
		if n == 0 || n >= 40 || n > capBytes/(8<<10) {
			t.Errorf("Len = %d after 40 puts of 8 KiB under a 64 KiB cap; want between 1 and 8", n)
		}
		if _, ok, _ := c.Get(ctx, KeyN(39)); !ok {
			t.Error("the most recently put entry must survive eviction")
		}
		if s := c.Stats(); s.Evictions == 0 || s.MaxBytes != capBytes {
			t.Errorf("Stats evictions %d, max bytes %d; want > 0 and %d", s.Evictions, s.MaxBytes, capBytes)
		}
	})
	t.Run("Context", func(t *testing.T) {
		c := open(t, 0)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, _, err := c.Get(cctx, KeyN(1)); !errors.Is(err, context.Canceled) {
			t.Errorf("Get with a cancelled context = %v, want context.Canceled", err)
		}
		if err := c.Put(cctx, KeyN(1), ObjectN(1, 1)); !errors.Is(err, context.Canceled) {
			t.Errorf("Put with a cancelled context = %v, want context.Canceled", err)
		}
	})
	t.Run("Close", func(t *testing.T) {
		c := b.Open(t, 0)
		mustPut(t, c, 1, 1)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close = %v, want nil", err)
		}
		for _, op := range cacheOps(c) {
			err := op.run(ctx)
			if !errors.Is(err, progcache.ErrClosed) {
				t.Errorf("%s after Close = %v, want ErrClosed", op.name, err)
			} else if !errors.Is(err, accelkitClosed{}) {
				t.Errorf("%s after Close = %v: must match driver.ErrClosed (wrap progcache.ErrClosed)", op.name, err)
			}
		}
		if s := c.Stats(); s.Puts != 1 {
			t.Errorf("Stats after Close: puts %d, want 1 (Stats keeps answering)", s.Puts)
		}
	})
	t.Run("CloseConcurrent", func(t *testing.T) {
		// Close while every method runs on other goroutines, and twice at
		// once: each call either works or fails with ErrClosed, and both
		// Closes return nil. The race detector checks the rest.
		c := b.Open(t, 0)
		mustPut(t, c, 1, 100)
		ops := cacheOps(c)
		var wg sync.WaitGroup
		errs := make(chan error, len(ops)+2)
		start := make(chan struct{})
		for _, op := range ops {
			wg.Go(func() {
				<-start
				for range 200 {
					err := op.run(ctx)
					if errors.Is(err, progcache.ErrClosed) {
						return
					}
					if err != nil {
						errs <- fmt.Errorf("%s during Close: %w (want nil or ErrClosed)", op.name, err)
						return
					}
					_ = c.Stats()
				}
			})
		}
		for range 2 {
			wg.Go(func() {
				<-start
				if err := c.Close(); err != nil {
					errs <- fmt.Errorf("close racing with another Close and every method: %w (want nil)", err)
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if _, _, err := c.Get(ctx, KeyN(1)); !errors.Is(err, progcache.ErrClosed) {
			t.Errorf("Get after the concurrent Closes = %v, want ErrClosed", err)
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		c := open(t, 0)
		ops := b.Ops
		if ops == 0 {
			ops = 1000
		}
		const keys = 16
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 4 {
			wg.Go(func() {
				for i := range ops {
					n := (i*7 + w) % keys
					if err := c.Put(ctx, KeyN(n), ObjectN(n, 256+n)); err != nil {
						errs <- fmt.Errorf("writer: %w", err)
						return
					}
				}
			})
			wg.Go(func() {
				for i := range ops {
					n := (i*5 + w) % keys
					got, ok, err := c.Get(ctx, KeyN(n))
					if err != nil {
						errs <- fmt.Errorf("reader: %w", err)
						return
					}
					if ok && !got.Equal(ObjectN(n, 256+n)) {
						errs <- fmt.Errorf("reader saw a wrong or partial object for key %d", n)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	if _, ok := open(t, 0).(progcache.Admin); ok {
		t.Run("Admin", func(t *testing.T) { runAdmin(t, b, open) })
	}
	if _, ok := open(t, 0).(progcache.Viewer); ok {
		t.Run("Viewer", func(t *testing.T) { runViewer(t, b, open) })
	}
	if b.Reopen != nil {
		t.Run("Persistence", func(t *testing.T) {
			c := b.Open(t, 0)
			for i := range 3 {
				mustPut(t, c, i, 1000)
			}
			c = b.Reopen(t, c)
			defer c.Close()
			for i := range 3 {
				got, ok, err := c.Get(ctx, KeyN(i))
				if !ok || err != nil || !got.Equal(ObjectN(i, 1000)) {
					t.Fatalf("entry %d after reopen: hit %v err %v", i, ok, err)
				}
			}
		})
	}
}

// runViewer checks the progcache.Viewer contract: a view shows what Get
// returns, fn runs once on a hit and never on a miss, its error comes
// back, hits and misses are counted, and views of concurrent readers
// never mix (each sees whole, right objects while writers replace them).
func runViewer(t *testing.T, b Backend, open func(t *testing.T, maxBytes int64) progcache.Cache) {
	ctx := context.Background()
	t.Run("CallbackCallsCache", func(t *testing.T) { checkCallbackCalls(t, b) })
	t.Run("SameAsGet", func(t *testing.T) {
		c := open(t, 0)
		v := c.(progcache.Viewer)
		for i, size := range []int{0, 1, 100, 64 << 10} {
			obj := mustPut(t, c, i, size)
			calls := 0
			ok, err := v.View(ctx, KeyN(i), func(view progcache.View) error {
				calls++
				if !bytes.Equal(view.Code(), obj.Code) || view.Kind() != obj.Kind || view.Name() != obj.Name {
					return fmt.Errorf("view of object %d shows kind %q name %q and %d code bytes, want %q %q %d", i, view.Kind(), view.Name(), len(view.Code()), obj.Kind, obj.Name, len(obj.Code))
				}
				if s, ok := view.Symbol("k"); !ok || s != obj.Symbols["k"] {
					return fmt.Errorf("view.Symbol(\"k\") = %q, %v; want %q", s, ok, obj.Symbols["k"])
				}
				if s, ok := view.Metadata("n"); !ok || s != obj.Metadata["n"] {
					return fmt.Errorf("view.Metadata(\"n\") = %q, %v; want %q", s, ok, obj.Metadata["n"])
				}
				if _, ok := view.Symbol("absent"); ok {
					return errors.New("view.Symbol of an absent name reports it present")
				}
				if got := view.Object(); !got.Equal(obj) {
					return fmt.Errorf("view.Object() of object %d differs from what was put", i)
				}
				return nil
			})
			if !ok || err != nil || calls != 1 {
				t.Fatalf("View of object %d = hit %v, err %v, fn called %d times; want a hit, nil, once", i, ok, err, calls)
			}
		}
	})
	t.Run("MissAndError", func(t *testing.T) {
		c := open(t, 0)
		v := c.(progcache.Viewer)
		before := c.Stats()
		ok, err := v.View(ctx, KeyN(9), func(progcache.View) error {
			t.Error("fn called on a miss")
			return nil
		})
		if ok || err != nil {
			t.Fatalf("View of an absent key = hit %v, err %v; want a miss without error", ok, err)
		}
		if s := c.Stats(); s.Misses != before.Misses+1 {
			t.Errorf("Stats.Misses = %d after a View miss, want %d", s.Misses, before.Misses+1)
		}
		mustPut(t, c, 1, 10)
		sentinel := errors.New("from fn")
		ok, err = v.View(ctx, KeyN(1), func(progcache.View) error { return sentinel })
		if !ok || !errors.Is(err, sentinel) {
			t.Fatalf("View whose fn fails = hit %v, err %v; want a hit and fn's error", ok, err)
		}
		if s := c.Stats(); s.Hits < 1 {
			t.Errorf("Stats.Hits = %d after a View hit, want at least 1", s.Hits)
		}
		// fn may call the cache: no lock is held while it runs.
		ok, err = v.View(ctx, KeyN(1), func(progcache.View) error {
			_, _, err := c.Get(ctx, KeyN(1))
			return err
		})
		if !ok || err != nil {
			t.Fatalf("View whose fn calls Get = hit %v, err %v", ok, err)
		}
	})
	t.Run("ConcurrentReaders", func(t *testing.T) {
		c := open(t, 0)
		v := c.(progcache.Viewer)
		const keys = 8
		for n := range keys {
			mustPut(t, c, n, 4096+n)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		wg.Go(func() {
			for i := range 200 {
				n := i % keys
				if err := c.Put(ctx, KeyN(n), ObjectN(n, 4096+n)); err != nil {
					errs <- fmt.Errorf("writer: %w", err)
					return
				}
			}
		})
		for w := range 3 {
			wg.Go(func() {
				for i := range 300 {
					n := (i*3 + w) % keys
					want := ObjectN(n, 4096+n)
					_, err := v.View(ctx, KeyN(n), func(view progcache.View) error {
						if !bytes.Equal(view.Code(), want.Code) || view.Name() != want.Name {
							return fmt.Errorf("reader saw a wrong or partial object for key %d", n)
						}
						return nil
					})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// deadlockTimeout is how long checkCallbackCalls waits for a View and a
// Close before it reports a deadlock: far longer than either takes, even
// under the race detector on a loaded machine.
const deadlockTimeout = 10 * time.Second

// closeStartDelay is how long fn waits after starting Close on another
// goroutine, so that Close is pending (waiting for what it waits for)
// when fn calls the cache.
const closeStartDelay = 50 * time.Millisecond

// checkCallbackCalls checks what the Viewer contract lets fn call: any
// method of the same cache, while Close is pending on another goroutine
// (each call works or fails with ErrClosed, and neither View nor Close
// waits for the other), and Close itself.
func checkCallbackCalls(t *testing.T, b Backend) {
	ctx := context.Background()
	// Each cache is closed here; one left deadlocked is not closed again
	// (the Close would hang too).
	await := func(t *testing.T, what string, ch <-chan error) error {
		t.Helper()
		select {
		case err := <-ch:
			return err
		case <-time.After(deadlockTimeout):
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("deadlock: %s did not return within %v. View's fn must run with no lock that Close waits for, and a call from fn must not wait for a Close that waits for fn. Goroutines:\n%s", what, deadlockTimeout, buf)
		}
		return nil
	}
	okOrClosed := func(err error) bool { return err == nil || errors.Is(err, progcache.ErrClosed) }

	t.Run("WhileClosePending", func(t *testing.T) {
		c := b.Open(t, 0)
		v := c.(progcache.Viewer)
		mustPut(t, c, 1, 100)
		mustPut(t, c, 2, 100)
		closed := make(chan error, 1)
		done := make(chan error, 1)
		go func() {
			ok, err := v.View(ctx, KeyN(1), func(progcache.View) error {
				// With no Close, every call works.
				if _, ok, err := c.Get(ctx, KeyN(2)); !ok || err != nil {
					return fmt.Errorf("Get from fn = hit %v, err %v; want a hit", ok, err)
				}
				if err := c.Put(ctx, KeyN(3), ObjectN(3, 10)); err != nil {
					return fmt.Errorf("Put from fn: %w", err)
				}
				if ok, err := v.View(ctx, KeyN(3), func(progcache.View) error { return nil }); !ok || err != nil {
					return fmt.Errorf("View from fn = hit %v, err %v; want a hit", ok, err)
				}
				go func() { closed <- c.Close() }()
				time.Sleep(closeStartDelay)
				// Close is pending (or done): each call works or fails
				// with ErrClosed.
				if _, _, err := c.Get(ctx, KeyN(2)); !okOrClosed(err) {
					return fmt.Errorf("Get from fn while Close is pending: %w; want nil or ErrClosed", err)
				}
				if err := c.Put(ctx, KeyN(4), ObjectN(4, 10)); !okOrClosed(err) {
					return fmt.Errorf("Put from fn while Close is pending: %w; want nil or ErrClosed", err)
				}
				if _, err := v.View(ctx, KeyN(2), func(progcache.View) error { return nil }); !okOrClosed(err) {
					return fmt.Errorf("View from fn while Close is pending: %w; want nil or ErrClosed", err)
				}
				return nil
			})
			if err == nil && !ok {
				err = errors.New("View of a stored key missed")
			}
			done <- err
		}()
		if err := await(t, "a View whose fn calls Get, Put and View while Close is pending", done); err != nil {
			t.Error(err)
		}
		if err := await(t, "Close, after the View whose fn ran during it returned", closed); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, _, err := c.Get(ctx, KeyN(1)); !errors.Is(err, progcache.ErrClosed) {
			t.Errorf("Get after Close = %v, want ErrClosed", err)
		}
	})
	t.Run("CloseFromCallback", func(t *testing.T) {
		c := b.Open(t, 0)
		v := c.(progcache.Viewer)
		mustPut(t, c, 1, 100)
		done := make(chan error, 1)
		go func() {
			ok, err := v.View(ctx, KeyN(1), func(view progcache.View) error {
				if err := c.Close(); err != nil {
					return fmt.Errorf("Close from fn: %w", err)
				}
				// The View stays valid until fn returns.
				if !bytes.Equal(view.Code(), ObjectN(1, 100).Code) {
					return errors.New("the View changed when fn closed the cache")
				}
				if _, _, err := c.Get(ctx, KeyN(1)); !errors.Is(err, progcache.ErrClosed) {
					return fmt.Errorf("Get from fn after its Close = %v, want ErrClosed", err)
				}
				return nil
			})
			if err == nil && !ok {
				err = errors.New("View of a stored key missed")
			}
			done <- err
		}()
		if err := await(t, "a View whose fn calls Close", done); err != nil {
			t.Error(err)
		}
	})
}

// runAdmin checks the progcache.Admin contract.
func runAdmin(t *testing.T, b Backend, open func(t *testing.T, maxBytes int64) progcache.Cache) {
	ctx := context.Background()
	admin := func(t *testing.T) progcache.Admin { return open(t, 0).(progcache.Admin) }
	t.Run("Entries", func(t *testing.T) {
		a := admin(t)
		want := map[progcache.Key]progcache.Object{}
		for i, size := range []int{10, 1000, 5000} {
			want[KeyN(i)] = mustPut(t, a, i, size)
		}
		before := a.Stats()
		es, err := a.Entries(ctx, false)
		if err != nil {
			t.Fatalf("Entries: %v", err)
		}
		if len(es) != len(want) {
			t.Fatalf("Entries listed %d entries, want %d", len(es), len(want))
		}
		for _, e := range es {
			obj, ok := want[e.Key]
			switch {
			case !ok:
				t.Errorf("Entries listed key %s, which was never put", e.Key)
			case e.Err != "" || e.Unreadable || e.Foreign:
				t.Errorf("Entries reported a good entry %s as bad: %+v", e.Key, e)
			case e.Kind != obj.Kind || e.Name != obj.Name || e.CodeLen != len(obj.Code):
				t.Errorf("Entries: %s is kind %q name %q code %d bytes, want %q, %q, %d", e.Key, e.Kind, e.Name, e.CodeLen, obj.Kind, obj.Name, len(obj.Code))
			case e.Size < int64(e.CodeLen) || e.Used.IsZero():
				t.Errorf("Entries: %s has size %d for %d bytes of code, last used %v; want the record's size and a use time", e.Key, e.Size, e.CodeLen, e.Used)
			}
			delete(want, e.Key)
		}
		if after := a.Stats(); after.Hits != before.Hits || after.Misses != before.Misses {
			t.Errorf("Entries counted hits %d -> %d, misses %d -> %d; a listing is not a use", before.Hits, after.Hits, before.Misses, after.Misses)
		}
	})
	t.Run("Prune", func(t *testing.T) {
		a := admin(t)
		const n = 8
		for i := range n {
			mustPut(t, a, i, 8<<10)
		}
		if k, err := a.Prune(ctx, 0); k != 0 || err != nil {
			t.Errorf("Prune to 0 bytes = %d, %v; want nothing evicted (0 means no target)", k, err)
		}
		if _, err := a.Prune(ctx, -1); !errors.Is(err, progcache.ErrInvalidConfig) {
			t.Errorf("Prune to -1 bytes = %v, want ErrInvalidConfig", err)
		}
		es, err := a.Entries(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, e := range es {
			total += e.Size
		}
		evicted, err := a.Prune(ctx, total/2)
		if err != nil {
			t.Fatalf("Prune to half the size: %v", err)
		}
		left, _ := a.Len(ctx)
		if evicted == 0 || left != n-evicted {
			t.Errorf("Prune to half of %d bytes evicted %d and left %d of %d entries", total, evicted, left, n)
		}
		if s := a.Stats(); s.Evictions != int64(evicted) {
			t.Errorf("Stats.Evictions = %d after Prune evicted %d", s.Evictions, evicted)
		}
		es, _ = a.Entries(ctx, false)
		var kept int64
		for _, e := range es {
			kept += e.Size
		}
		if kept > total/2 {
			t.Errorf("after Prune to %d bytes the entries hold %d", total/2, kept)
		}
	})
	t.Run("Totals", func(t *testing.T) {
		c := b.Open(t, 0)
		a := c.(progcache.Admin)
		mustPut(t, a, 1, 100)
		if _, ok, err := a.Get(ctx, KeyN(1)); !ok || err != nil {
			t.Fatalf("Get of a stored key: hit %v, %v", ok, err)
		}
		if _, ok, err := a.Get(ctx, KeyN(2)); ok || err != nil {
			t.Fatalf("Get of a missing key: hit %v, %v; want a miss", ok, err)
		}
		s, err := a.Totals(ctx)
		if err != nil {
			t.Fatalf("Totals: %v", err)
		}
		if s.Hits != 1 || s.Misses != 1 || s.Puts != 1 || s.Entries != 1 || s.Bytes <= 0 {
			t.Errorf("Totals of a fresh cache after a put, a hit and a miss: %+v; want 1, 1, 1, one entry and its bytes", s)
		}
		if b.Reopen == nil {
			a.Close()
			return
		}
		// Every session counts: the closed one's and the new one's.
		c = b.Reopen(t, c)
		defer c.Close()
		a = c.(progcache.Admin)
		if _, ok, err := a.Get(ctx, KeyN(1)); !ok || err != nil {
			t.Fatalf("Get after reopening: hit %v, %v", ok, err)
		}
		s, err = a.Totals(ctx)
		if err != nil {
			t.Fatalf("Totals after reopening: %v", err)
		}
		if s.Hits != 2 || s.Misses != 1 || s.Puts != 1 || s.Entries != 1 {
			t.Errorf("Totals after reopening and one more hit: %+v; want 2 hits, 1 miss, 1 put, one entry", s)
		}
	})
}

// op is one method call that starts new work, for the Close checks.
type op struct {
	name string
	run  func(ctx context.Context) error
}

// cacheOps lists c's methods that start new work (Admin's too, when c is
// one), each called with arguments that succeed on an open cache.
func cacheOps(c progcache.Cache) []op {
	ops := []op{
		{"Get", func(ctx context.Context) error { _, _, err := c.Get(ctx, KeyN(1)); return err }},
		{"Put", func(ctx context.Context) error { return c.Put(ctx, KeyN(2), ObjectN(2, 100)) }},
		{"Delete", func(ctx context.Context) error { return c.Delete(ctx, KeyN(3)) }},
		{"Len", func(ctx context.Context) error { _, err := c.Len(ctx); return err }},
		{"Clear", func(ctx context.Context) error { return c.Clear(ctx) }},
	}
	if v, ok := c.(progcache.Viewer); ok {
		ops = append(ops, op{"View", func(ctx context.Context) error {
			_, err := v.View(ctx, KeyN(1), func(progcache.View) error { return nil })
			return err
		}})
	}
	if a, ok := c.(progcache.Admin); ok {
		ops = append(ops,
			op{"Entries", func(ctx context.Context) error { _, err := a.Entries(ctx, false); return err }},
			op{"Prune", func(ctx context.Context) error { _, err := a.Prune(ctx, 1<<30); return err }},
			op{"Totals", func(ctx context.Context) error { _, err := a.Totals(ctx); return err }},
		)
	}
	return ops
}

// mustPut stores ObjectN(n, size) under KeyN(n), failing the test if the
// Put fails: a check that builds on it would otherwise fail later, naming
// the wrong rule.
func mustPut(t *testing.T, c progcache.Cache, n, size int) progcache.Object {
	t.Helper()
	obj := ObjectN(n, size)
	if err := c.Put(context.Background(), KeyN(n), obj); err != nil {
		t.Fatalf("Put of object %d (code %d bytes): %v", n, size, err)
	}
	return obj
}

// accelkitClosed stands for driver.ErrClosed, which cachetest cannot import
// (progcache stands without the driver module): any target with the
// AccelkitClosed mark is matched by progcache.ErrClosed, as driver.ErrClosed
// is.
type accelkitClosed struct{}

func (accelkitClosed) Error() string   { return "closed" }
func (accelkitClosed) AccelkitClosed() {}
