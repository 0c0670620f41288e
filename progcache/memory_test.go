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

// TestMemoryGetInto: GetInto fills dst on a hit as Get returns it,
// leaves it alone on a miss and after Close, and counts as Get does.
func TestMemoryGetInto(t *testing.T) {
	ctx := context.Background()
	m, err := progcache.NewMemory(progcache.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj := progcache.Object{Kind: "cubin", Name: "k", Code: []byte{1, 2, 3}, Symbols: map[string]string{"k": "_Z1kv"}}
	if err := m.Put(ctx, progcache.Key{1}, obj); err != nil {
		t.Fatal(err)
	}
	var got progcache.Object
	if ok, err := m.GetInto(ctx, progcache.Key{1}, &got); !ok || err != nil || !got.Equal(obj) {
		t.Fatalf("GetInto hit = %v, %v, %+v; want true, nil, %+v", ok, err, got, obj)
	}
	keep := progcache.Object{Kind: "untouched"}
	got = keep
	if ok, err := m.GetInto(ctx, progcache.Key{2}, &got); ok || err != nil || !got.Equal(keep) {
		t.Fatalf("GetInto miss = %v, %v, %+v; want false, nil and dst untouched", ok, err, got)
	}
	if s := m.Stats(); s.Hits != 1 || s.Misses != 1 {
		t.Fatalf("stats after a hit and a miss: %+v", s)
	}
	m.Close()
	if ok, err := m.GetInto(ctx, progcache.Key{1}, &got); ok || !errors.Is(err, progcache.ErrClosed) || !got.Equal(keep) {
		t.Fatalf("GetInto after Close = %v, %v, %+v; want ErrClosed and dst untouched", ok, err, got)
	}
}
