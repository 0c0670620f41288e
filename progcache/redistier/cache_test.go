package redistier_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/redis/go-redis/v9"
)

// TestConformance runs progcache's conformance suite on a single node,
// each cache in a namespace of its own, the byte cap as Options.MaxBytes.
// The client is go-redis's default, which does not apply context
// deadlines to its sockets, so every call goes through the cache's own
// timeout goroutine.
func TestConformance(t *testing.T) {
	cachetest.Run(t, conformanceBackend(redistest.Start(t).Client(t), 300))
}

// conformanceBackend opens each cache of the conformance suite on client
// in a namespace of its own, the byte cap as Options.MaxBytes.
func conformanceBackend(client redis.UniversalClient, ops int) cachetest.Backend {
	return cachetest.Backend{
		Open: func(t *testing.T, maxBytes int64) progcache.Cache {
			c, err := redistier.New(client, redistier.Options{Namespace: freshNamespace(t), Record: progcache.RecordOptions{MACKey: testMAC}, MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		Ops: ops,
	}
}

func TestNewOptions(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: New sends nothing
	defer client.Close()
	mac := progcache.RecordOptions{MACKey: testMAC}
	for _, tc := range []struct {
		name string
		opts redistier.Options
		want string // in the error; "" for success
	}{
		{"MACKey", redistier.Options{Record: mac}, ""},
		{"trusted network", redistier.Options{TrustedNetworkNoMAC: true}, ""},
		{"no MAC key", redistier.Options{}, "TrustedNetworkNoMAC"},
		{"both", redistier.Options{Record: mac, TrustedNetworkNoMAC: true}, "both set"},
		{"short MAC key", redistier.Options{Record: progcache.RecordOptions{MACKey: []byte("short")}}, "MACKey of 5 bytes"},
		{"namespace charset", redistier.Options{Record: mac, Namespace: "a*b"}, "Options.Namespace"},
		{"namespace length", redistier.Options{Record: mac, Namespace: strings.Repeat("n", 65)}, "Options.Namespace"},
		{"namespace ok", redistier.Options{Record: mac, Namespace: "Fleet-1.ci_x"}, ""},
		{"TTL", redistier.Options{Record: mac, TTL: time.Microsecond}, "Options.TTL"},
		{"MaxEntryBytes", redistier.Options{Record: mac, MaxEntryBytes: 1 << 30}, "Options.MaxEntryBytes"},
		{"MaxBytes", redistier.Options{Record: mac, MaxBytes: -1}, "Options.MaxBytes"},
		{"Timeout", redistier.Options{Record: mac, Timeout: -time.Second}, "Options.Timeout"},
		{"BreakerFailures", redistier.Options{Record: mac, BreakerFailures: -1}, "Options.BreakerFailures"},
		{"BreakerCooldown", redistier.Options{Record: mac, BreakerCooldown: -1}, "Options.BreakerCooldown"},
		{"LeaseTTL under 3 timeouts", redistier.Options{Record: mac, Timeout: time.Second, LeaseTTL: 2 * time.Second}, "Options.LeaseTTL"},
		{"LeaseTTL ok", redistier.Options{Record: mac, Timeout: 10 * time.Millisecond, LeaseTTL: 30 * time.Millisecond}, ""},
		{"PrefetchBatch", redistier.Options{Record: mac, PrefetchBatch: -5}, "Options.PrefetchBatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redistier.New(client, tc.opts)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New(%+v) = %v, want success", tc.opts, err)
				}
				c.Close()
				return
			}
			if err == nil || !errors.Is(err, progcache.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v) = %v, want ErrInvalidConfig naming %q", tc.opts, err, tc.want)
			}
		})
	}
	if _, err := redistier.New(nil, redistier.Options{Record: mac}); !errors.Is(err, progcache.ErrInvalidConfig) {
		t.Errorf("New(nil client) = %v, want ErrInvalidConfig", err)
	}
}

// TestRefusesWithoutMAC checks that the refusal names both ways out.
func TestRefusesWithoutMAC(t *testing.T) {
	_, err := redistier.New(redis.NewClient(&redis.Options{}), redistier.Options{})
	if err == nil {
		t.Fatal("New without a MAC key and without TrustedNetworkNoMAC succeeded")
	}
	for _, want := range []string{"Options.Record.MACKey", "Options.TrustedNetworkNoMAC"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
}

// TestBadEntries plants values behind the cache's back: each must be a
// counted miss, deleted when corrupt and kept when only unreadable here.
func TestBadEntries(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	k := cachetest.KeyN(1)
	obj := cachetest.ObjectN(1, 1000)
	good, err := progcache.EncodeRecord(k, obj, progcache.RecordOptions{MACKey: testMAC})
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(good)
	tampered[len(tampered)/2] ^= 1
	otherKey, _ := progcache.EncodeRecord(k, obj, progcache.RecordOptions{MACKey: bytes.Repeat([]byte{7}, 32)})
	noMAC, _ := progcache.EncodeRecord(k, obj, progcache.RecordOptions{})
	moved, _ := progcache.EncodeRecord(cachetest.KeyN(2), obj, progcache.RecordOptions{MACKey: testMAC})
	for _, tc := range []struct {
		name       string
		value      []byte
		corrupt    bool // counted corrupt and deleted; else unreadable and kept
		unreadable bool
	}{
		{"garbage", []byte("not a record at all"), true, false},
		{"tampered code", tampered, true, false},
		{"truncated", good[:len(good)-10], true, false},
		{"record of another key", moved, true, false},
		{"sealed with another MAC key", otherKey, false, true},
		{"sealed without a MAC", noMAC, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openCache(t, raw, redistier.Options{})
			key := entryKey(c.Namespace(), k)
			if err := raw.Set(bg, key, tc.value, 0).Err(); err != nil {
				t.Fatal(err)
			}
			for _, get := range []func() bool{
				func() bool { _, ok, err := c.Get(bg, k); return ok || err != nil },
				func() bool {
					ok, err := c.View(bg, k, func(progcache.View) error { return errors.New("fn called on a bad entry") })
					return ok || err != nil
				},
			} {
				if tc.corrupt {
					raw.Set(bg, key, tc.value, 0) // put it back after the first deletion
				}
				if get() {
					t.Fatal("a bad entry was a hit or an error; want a miss")
				}
			}
			s := c.RedisStats()
			n, _ := raw.Exists(bg, key).Result()
			switch {
			case tc.corrupt && (s.Corrupt != 2 || s.CorruptDeleted != 2 || n != 0):
				t.Errorf("corrupt entry: Corrupt %d, CorruptDeleted %d, still stored %v; want 2, 2, deleted", s.Corrupt, s.CorruptDeleted, n == 1)
			case tc.unreadable && (s.Unreadable != 2 || s.Corrupt != 0 || n != 1):
				t.Errorf("unreadable entry: Unreadable %d, Corrupt %d, still stored %v; want 2, 0, kept", s.Unreadable, s.Corrupt, n == 1)
			}
			if s.Misses != 2 || s.Hits != 0 {
				t.Errorf("Hits %d, Misses %d; want 0 and 2", s.Hits, s.Misses)
			}
			// The key works again afterwards.
			if err := c.Put(bg, k, obj); err != nil {
				t.Fatal(err)
			}
			if got, ok, _ := c.Get(bg, k); !ok || !got.Equal(obj) {
				t.Error("Put after a bad entry: Get does not return the object")
			}
		})
	}
}

// TestGetReturnsOwnMemory checks that the object Get returns is the
// caller's to modify.
func TestGetReturnsOwnMemory(t *testing.T) {
	c := openCache(t, redistest.Start(t).Client(t), redistier.Options{})
	obj := cachetest.ObjectN(3, 4096)
	if err := c.Put(bg, cachetest.KeyN(3), obj); err != nil {
		t.Fatal(err)
	}
	a, _, _ := c.Get(bg, cachetest.KeyN(3))
	for i := range a.Code {
		a.Code[i] = 0
	}
	b, ok, _ := c.Get(bg, cachetest.KeyN(3))
	if !ok || !b.Equal(obj) {
		t.Fatal("changing one Get's Code changed what a later Get returns")
	}
}

func TestTTL(t *testing.T) {
	raw := redistest.Start(t).Client(t)
	for _, ttl := range []time.Duration{0, time.Hour, 300 * time.Millisecond} {
		c := openCache(t, raw, redistier.Options{TTL: ttl})
		k := cachetest.KeyN(1)
		if err := c.Put(bg, k, cachetest.ObjectN(1, 10)); err != nil {
			t.Fatal(err)
		}
		left, err := raw.PTTL(bg, entryKey(c.Namespace(), k)).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ttl == 0 && left != -1:
			t.Errorf("TTL 0: the entry expires in %v; want no expiry", left)
		case ttl > 0 && (left <= 0 || left > ttl):
			t.Errorf("TTL %v: the entry expires in %v; want within (0, %v]", ttl, left, ttl)
		}
		if ttl > 0 && ttl < time.Second {
			eventually(t, 10*time.Second, "the entry expires", func() bool {
				_, ok, _ := c.Get(bg, k)
				return !ok
			})
		}
	}
}

func TestEntryCap(t *testing.T) {
	c := openCache(t, redistest.Start(t).Client(t), redistier.Options{MaxEntryBytes: 4096})
	if err := c.Put(bg, cachetest.KeyN(1), cachetest.ObjectN(1, 3000)); err != nil {
		t.Fatalf("Put under the cap: %v", err)
	}
	err := c.Put(bg, cachetest.KeyN(2), cachetest.ObjectN(2, 8192))
	if !errors.Is(err, progcache.ErrTooLarge) || !strings.Contains(err.Error(), "MaxEntryBytes") {
		t.Fatalf("Put over MaxEntryBytes = %v, want ErrTooLarge naming the option", err)
	}
	if _, ok, _ := c.Get(bg, cachetest.KeyN(2)); ok {
		t.Error("an entry over the cap was stored")
	}
	if s := c.Stats(); s.TooLarge != 1 || s.Puts != 1 {
		t.Errorf("TooLarge %d, Puts %d; want 1 and 1", s.TooLarge, s.Puts)
	}
}

// TestNamespaces checks that two namespaces on one server do not see each
// other's entries, and that Len and Clear stay in their own.
func TestNamespaces(t *testing.T) {
	raw := redistest.Start(t).Client(t)
	a := openCache(t, raw, redistier.Options{Namespace: "fleet-a"})
	b := openCache(t, raw, redistier.Options{Namespace: "fleet-b"})
	for i := range 5 {
		if err := a.Put(bg, cachetest.KeyN(i), cachetest.ObjectN(i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Put(bg, cachetest.KeyN(0), cachetest.ObjectN(99, 100)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := a.Get(bg, cachetest.KeyN(0)); !got.Equal(cachetest.ObjectN(0, 100)) {
		t.Error("namespace b's Put of a key replaced namespace a's entry")
	}
	if _, ok, _ := b.Get(bg, cachetest.KeyN(1)); ok {
		t.Error("namespace b sees an entry of namespace a")
	}
	if na, _ := a.Len(bg); na != 5 {
		t.Errorf("Len of a = %d, want 5", na)
	}
	if nb, _ := b.Len(bg); nb != 1 {
		t.Errorf("Len of b = %d, want 1", nb)
	}
	if err := a.Clear(bg); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.Get(bg, cachetest.KeyN(0)); !ok {
		t.Error("Clear of namespace a removed namespace b's entry")
	}
	keys, _ := raw.Keys(bg, "*").Result() // a test server: KEYS is fine here
	for _, k := range keys {
		if !strings.HasPrefix(k, "progcache:fleet-b:") {
			t.Errorf("key %q outside namespace b left after Clear of a", k)
		}
	}
}

// TestMaxBytesLRU checks the namespace budget's eviction order: a Get
// makes an entry recent.
func TestMaxBytesLRU(t *testing.T) {
	raw := redistest.Start(t).Client(t)
	size := progcache.RecordSize(cachetest.ObjectN(0, 1000), progcache.RecordOptions{MACKey: testMAC})
	c := openCache(t, raw, redistier.Options{MaxBytes: 3*size + size/2})
	for i := range 3 {
		if err := c.Put(bg, cachetest.KeyN(i), cachetest.ObjectN(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := c.Get(bg, cachetest.KeyN(0)); !ok {
		t.Fatal("entry 0 missing before any eviction")
	}
	if err := c.Put(bg, cachetest.KeyN(3), cachetest.ObjectN(3, 1000)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, true, true} {
		if _, ok, _ := c.Get(bg, cachetest.KeyN(i)); ok != want {
			t.Errorf("entry %d present %v, want %v (entry 1 is the least recently used)", i, ok, want)
		}
	}
	if s := c.Stats(); s.Evictions != 1 {
		t.Errorf("Evictions = %d, want 1", s.Evictions)
	}
	// Delete and Clear keep the index right: after them the budget holds
	// three entries again.
	if err := c.Delete(bg, cachetest.KeyN(0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Clear(bg); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.Put(bg, cachetest.KeyN(10+i), cachetest.ObjectN(10+i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := c.Len(bg); n != 3 {
		t.Errorf("Len = %d after Clear and three Puts within the budget, want 3", n)
	}
}

// TestMaxmemoryEviction runs the cache on a server with a small maxmemory
// and allkeys-lru, the deployment the README recommends: Puts keep
// succeeding as Redis evicts, and an evicted entry is a plain miss.
func TestMaxmemoryEviction(t *testing.T) {
	srv := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
	c := openCache(t, srv.Client(t), redistier.Options{})
	const n = 200
	for i := range n {
		if err := c.Put(bg, cachetest.KeyN(i), cachetest.ObjectN(i, 64<<10)); err != nil {
			t.Fatalf("Put %d under maxmemory with allkeys-lru: %v", i, err)
		}
	}
	left, err := c.Len(bg)
	if err != nil || left == 0 || left >= n {
		t.Fatalf("Len = %d, %v after %d Puts of 64 KiB into 4 MB: want some entries evicted by Redis, some kept", left, err, n)
	}
	hits := 0
	for i := range n {
		got, ok, err := c.Get(bg, cachetest.KeyN(i))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			hits++
			if !got.Equal(cachetest.ObjectN(i, 64<<10)) {
				t.Fatalf("entry %d came back wrong after evictions", i)
			}
		}
	}
	s := c.RedisStats()
	// Redis may evict more while the Gets run (their replies take memory
	// too), so hits may be fewer than the entries Len counted.
	if hits == 0 || hits > left || s.Misses != int64(n-hits) || s.Errors != 0 || s.Corrupt != 0 {
		t.Errorf("%d hits of %d kept entries; stats %+v: want kept entries hits, evicted ones plain misses, no errors", hits, left, s)
	}
}
