// Package cachetest checks a progcache.Cache implementation against the
// contract, in the manner of testing/fstest: Run runs subtests whose
// failures name the rule broken.
package cachetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

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
		if _, _, err := c.Get(ctx, KeyN(1)); !errors.Is(err, progcache.ErrClosed) {
			t.Errorf("Get after Close = %v, want ErrClosed", err)
		}
		if err := c.Put(ctx, KeyN(1), ObjectN(1, 1)); !errors.Is(err, progcache.ErrClosed) {
			t.Errorf("Put after Close = %v, want ErrClosed", err)
		}
		_ = c.Stats()
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
