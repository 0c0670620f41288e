package redistier_test

import (
	"errors"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/redis/go-redis/v9"
)

// prefetchCase stores entries 0..stored-1 and plants garbage under key
// corruptN, then checks that a Prefetch of keys 0..asked-1 delivers the
// stored ones in order, skips the rest, and counts what it should.
func prefetchCase(t *testing.T, client redis.UniversalClient, raw redis.UniversalClient, stored, asked, corruptN int) {
	t.Helper()
	c := openCache(t, client, redistier.Options{PrefetchBatch: 16})
	for i := range stored {
		if err := c.Put(bg, cachetest.KeyN(i), cachetest.ObjectN(i, 2000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.Set(bg, entryKey(c.Namespace(), cachetest.KeyN(corruptN)), "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	keys := make([]progcache.Key, asked)
	for i := range keys {
		keys[i] = cachetest.KeyN(i)
	}
	var got []int
	n, err := c.Prefetch(bg, keys, func(k progcache.Key, obj progcache.Object) error {
		i := len(got)
		if i >= corruptN {
			i++
		}
		if k != cachetest.KeyN(i) || !obj.Equal(cachetest.ObjectN(i, 2000)) {
			t.Fatalf("Prefetch delivered %s as object %d out of order or wrong", k, i)
		}
		got = append(got, i)
		return nil
	})
	want := stored - 1 // the corrupt one is skipped
	if err != nil || n != want || len(got) != want {
		t.Fatalf("Prefetch of %d keys (%d stored, one corrupt) = %d, %v, fn called %d times; want %d", asked, stored, n, err, len(got), want)
	}
	s := c.RedisStats()
	if s.Prefetched != int64(want) || s.PrefetchMisses != int64(asked-want) || s.Corrupt != 1 || s.CorruptDeleted != 1 || s.Hits != 0 || s.Misses != 0 {
		t.Errorf("stats after Prefetch: %+v; want %d prefetched, %d prefetch misses, 1 corrupt deleted, no hits or misses", s, want, asked-want)
	}
	// fn's error stops it and comes back.
	stop := errors.New("enough")
	n, err = c.Prefetch(bg, keys, func(progcache.Key, progcache.Object) error { return stop })
	if n != 1 || !errors.Is(err, stop) {
		t.Errorf("Prefetch whose fn fails = %d, %v; want 1 and fn's error", n, err)
	}
	if n, err := c.Prefetch(bg, nil, nil); n != 0 || err != nil {
		t.Errorf("Prefetch of no keys = %d, %v", n, err)
	}
}

func TestPrefetch(t *testing.T) {
	raw := redistest.Start(t).Client(t)
	prefetchCase(t, raw, raw, 150, 200, 20)
}
