package progcache_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
)

func TestMemoryConformance(t *testing.T) {
	cachetest.Run(t, cachetest.Backend{Open: func(t *testing.T, maxBytes int64) progcache.Cache {
		c, err := progcache.NewMemory(progcache.MemoryOptions{MaxBytes: maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}})
}

func TestMemoryLRU(t *testing.T) {
	ctx := context.Background()
	c, _ := progcache.NewMemory(progcache.MemoryOptions{MaxEntries: 2})
	k := cachetest.KeyN
	c.Put(ctx, k(1), cachetest.ObjectN(1, 1))
	c.Put(ctx, k(2), cachetest.ObjectN(2, 1))
	c.Get(ctx, k(1))     // promote 1
	_ = c.Contains(k(2)) // must not promote 2
	c.Len(ctx)
	c.Put(ctx, k(3), cachetest.ObjectN(3, 1))
	if !c.Contains(k(1)) || c.Contains(k(2)) || !c.Contains(k(3)) {
		t.Fatalf("LRU kept 1:%v 2:%v 3:%v; want 1 and 3 (Get promotes, Contains does not)", c.Contains(k(1)), c.Contains(k(2)), c.Contains(k(3)))
	}
	if s := c.Stats(); s.Evictions != 1 || s.Entries != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestMemoryCaps(t *testing.T) {
	for _, tc := range []struct {
		o     progcache.MemoryOptions
		field string
	}{
		{progcache.MemoryOptions{MaxEntries: -1}, "MemoryOptions.MaxEntries -1"},
		{progcache.MemoryOptions{MaxBytes: -1}, "MemoryOptions.MaxBytes -1"},
	} {
		if _, err := progcache.NewMemory(tc.o); !errors.Is(err, progcache.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("NewMemory(%+v) = %v; want ErrInvalidConfig naming the field and value (%q)", tc.o, err, tc.field)
		}
	}
	// Zero caps mean no cap.
	c, _ := progcache.NewMemory(progcache.MemoryOptions{})
	for i := range 1000 {
		c.Put(context.Background(), cachetest.KeyN(i), cachetest.ObjectN(i, 100))
	}
	if n, _ := c.Len(context.Background()); n != 1000 {
		t.Errorf("Len = %d with no caps, want 1000", n)
	}
}

func TestMemoryByReference(t *testing.T) {
	c, _ := progcache.NewMemory(progcache.MemoryOptions{})
	obj := cachetest.ObjectN(1, 10)
	c.Put(context.Background(), cachetest.KeyN(1), obj)
	got, _, _ := c.Get(context.Background(), cachetest.KeyN(1))
	if &got.Code[0] != &obj.Code[0] {
		t.Error("memory cache must store objects by reference")
	}
}
