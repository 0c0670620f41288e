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
