package redistier

import (
	"bytes"
	"context"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
)

// TestDeleteCorruptComparesValue: a corrupt value is deleted only if it is
// still the value that was read; a peer's rewrite in between stays.
func TestDeleteCorruptComparesValue(t *testing.T) {
	ctx := context.Background()
	raw := redistest.Start(t).Client(t)
	c, err := New(raw, Options{Record: progcache.RecordOptions{MACKey: bytes.Repeat([]byte{1}, 32)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := cachetest.KeyN(1)
	key := c.ks.entry(k)
	read := []byte("the corrupt value this process read")
	if err := raw.Set(ctx, key, "what a peer wrote since", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c.deleteCorrupt(ctx, k, read)
	if n, _ := raw.Exists(ctx, key).Result(); n != 1 || c.RedisStats().CorruptDeleted != 0 {
		t.Fatal("deleteCorrupt removed a value other than the one read")
	}
	raw.Set(ctx, key, read, 0)
	c.deleteCorrupt(ctx, k, read)
	if n, _ := raw.Exists(ctx, key).Result(); n != 0 || c.RedisStats().CorruptDeleted != 1 {
		t.Fatal("deleteCorrupt kept the corrupt value it read")
	}
	// Absent: nothing to do, nothing counted.
	c.deleteCorrupt(ctx, k, read)
	if s := c.RedisStats(); s.CorruptDeleted != 1 || s.Errors != 0 {
		t.Errorf("deleteCorrupt of an absent key: %+v", s)
	}
}

// TestDropUnusableKeepsRewrite: the delete of a value that cannot be an
// entry is a compare-and-delete on the server: a value over the cap or of
// another type goes, but one a legitimate Put wrote since it was read (a
// string within the cap) stays.
func TestDropUnusableKeepsRewrite(t *testing.T) {
	ctx := context.Background()
	raw := redistest.Start(t).Client(t)
	c, err := New(raw, Options{TrustedNetworkNoMAC: true, MaxEntryBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := cachetest.KeyN(1)
	key := c.ks.entry(k)
	for _, tc := range []struct {
		name  string
		plant func() error
		gone  bool
	}{
		{"rewritten by a Put", func() error { return c.Put(ctx, k, progcache.Object{Kind: "cubin", Code: []byte("ok")}) }, false},
		{"over the cap", func() error { return raw.SetRange(ctx, key, 1000, "x").Err() }, true},
		{"a list", func() error { return raw.RPush(ctx, key, "a").Err() }, true},
		{"a hash", func() error { return raw.HSet(ctx, key, "a", "b").Err() }, true},
	} {
		raw.Del(ctx, key)
		if err := tc.plant(); err != nil {
			t.Fatal(err)
		}
		c.dropUnusable(ctx, k, oversized)
		if n, _ := raw.Exists(ctx, key).Result(); (n == 0) != tc.gone {
			t.Errorf("%s: deleted %v, want %v", tc.name, n == 0, tc.gone)
		}
	}
}
