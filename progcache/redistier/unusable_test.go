package redistier_test

import (
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
)

// plantBig stores a string of size bytes under key without sending it:
// SETRANGE zero-fills up to the offset, on the server.
func plantBig(t *testing.T, srv *redistest.Server, key string, size int64) {
	t.Helper()
	if err := srv.Client(t).SetRange(bg, key, size-1, "x").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestOversizedValue: a value over the entry cap planted under an entry's
// name (256 MiB, as the issue found; and 2 MiB, which the guard lets
// through but the cap does not) is a counted miss that the cache deletes,
// at once: not a lookup that times out, keeps the value and opens the
// breaker.
func TestOversizedValue(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	// 250 ms: far below what reading 256 MiB takes, with room for a
	// loaded 2-core machine under -race.
	opts := redistier.Options{MaxEntryBytes: 1 << 20, Timeout: 250 * time.Millisecond, BreakerFailures: 2}
	for _, size := range []int64{256 << 20, 2 << 20} {
		c := openCache(t, clientOf(t, srv.Addr, true), opts)
		k := cachetest.KeyN(7)
		key := entryKey(c.Namespace(), k)
		plantBig(t, srv, key, size)
		for range 3 {
			if _, ok, err := c.Get(bg, k); ok || err != nil {
				t.Fatalf("Get of a %d-byte value = hit %v, %v; want a miss", size, ok, err)
			}
		}
		s := c.RedisStats()
		if s.Oversized != 1 || s.Corrupt != 1 || s.CorruptDeleted != 1 || s.Misses != 3 || s.Timeouts != 0 || s.Errors != 0 || s.Breaker != redistier.BreakerClosed {
			t.Errorf("%d-byte value under an entry's name, 3 Gets: %+v; want 1 oversized (deleted), 3 misses, no timeout or error, the breaker closed", size, s)
		}
		if n, _ := raw.Exists(bg, key).Result(); n != 0 {
			t.Errorf("the %d-byte value is still there", size)
		}
		// The entry works again.
		if err := c.Put(bg, k, cachetest.ObjectN(7, 100)); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := c.Get(bg, k); !ok {
			t.Errorf("Get after a Put over the deleted %d-byte value missed", size)
		}
	}
}

// TestWrongTypeValue: a list planted under one entry's name is one
// counted miss, deleted, for Get and for Prefetch, whose other keys are
// still delivered.
func TestWrongTypeValue(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	for _, maxBytes := range []int64{0, 1 << 20} { // without and with the index's pipelined GET
		c := openCache(t, clientOf(t, srv.Addr, true), redistier.Options{MaxBytes: maxBytes})
		plant := func(i int) string {
			key := entryKey(c.Namespace(), cachetest.KeyN(i))
			raw.Del(bg, key)
			if err := raw.RPush(bg, key, "a", "b").Err(); err != nil {
				t.Fatal(err)
			}
			return key
		}
		key := plant(3)
		if _, ok, err := c.Get(bg, cachetest.KeyN(3)); ok || err != nil {
			t.Fatalf("Get of a list = hit %v, %v; want a miss", ok, err)
		}
		if s := c.RedisStats(); s.Corrupt != 1 || s.CorruptDeleted != 1 || s.Misses != 1 {
			t.Errorf("Get of a list: %+v; want 1 corrupt miss, deleted", s)
		}
		if n, _ := raw.Exists(bg, key).Result(); n != 0 {
			t.Error("the list is still there after Get")
		}

		keys := make([]progcache.Key, 10)
		for i := range keys {
			keys[i] = cachetest.KeyN(i)
			if err := c.Put(bg, keys[i], cachetest.ObjectN(i, 100)); err != nil {
				t.Fatal(err)
			}
		}
		key = plant(3)
		var got []progcache.Key
		n, err := c.Prefetch(bg, keys, func(k progcache.Key, _ progcache.Object) error {
			got = append(got, k)
			return nil
		})
		if n != 9 || err != nil || len(got) != 9 {
			t.Fatalf("Prefetch of 10 keys, one a list = %d, %v; want 9, nil", n, err)
		}
		if s := c.RedisStats(); s.PrefetchMisses != 1 || s.Corrupt != 2 || s.CorruptDeleted != 2 {
			t.Errorf("Prefetch with a list: %+v; want 1 prefetch miss, 2 corrupt deleted in all", s)
		}
		if n, _ := raw.Exists(bg, key).Result(); n != 0 {
			t.Error("the list is still there after Prefetch")
		}
	}
}

// TestPrefetchOversized: a value over the guard's limit in the middle of
// a Prefetch batch ends its connection; the keys after it are fetched
// again and delivered, in order.
func TestPrefetchOversized(t *testing.T) {
	srv := redistest.Start(t)
	c := openCache(t, clientOf(t, srv.Addr, true), redistier.Options{MaxEntryBytes: 1 << 20, PrefetchBatch: 8})
	keys := make([]progcache.Key, 12)
	for i := range keys {
		keys[i] = cachetest.KeyN(i)
		if err := c.Put(bg, keys[i], cachetest.ObjectN(i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	plantBig(t, srv, entryKey(c.Namespace(), keys[4]), 8<<20)
	var got []int
	n, err := c.Prefetch(bg, keys, func(k progcache.Key, obj progcache.Object) error {
		for i := range keys {
			if keys[i] == k && obj.Equal(cachetest.ObjectN(i, 100)) {
				got = append(got, i)
			}
		}
		return nil
	})
	want := []int{0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11}
	if n != len(want) || err != nil || len(got) != len(want) {
		t.Fatalf("Prefetch of 12 keys, one of 8 MiB = %d, %v, delivered %v; want %v", n, err, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Prefetch delivered %v, want %v in order", got, want)
		}
	}
	if s := c.RedisStats(); s.Oversized != 1 || s.CorruptDeleted != 1 || s.PrefetchMisses != 1 || s.Breaker != redistier.BreakerClosed {
		t.Errorf("after Prefetch: %+v; want 1 oversized, deleted, 1 prefetch miss, the breaker closed", s)
	}
}
