package redistier_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/redis/go-redis/v9"
)

// benchCase is one configuration of the remote get and put benchmarks.
type benchCase struct {
	name    string
	size    int
	seal    string // "gmac" (the default MAC), "hmac" (HMAC-SHA-256), or "crc" (CRC-32C, TrustedNetworkNoMAC)
	honours bool   // client with ContextTimeoutEnabled: calls run in place
}

func benchCases() []benchCase {
	var cs []benchCase
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		for _, seal := range []string{"gmac", "hmac", "crc"} {
			for _, honours := range []bool{false, true} {
				client := "default-client"
				if honours {
					client = "ctx-deadline-client"
				}
				cs = append(cs, benchCase{fmt.Sprintf("%dKiB/%s/%s", size>>10, seal, client), size, seal, honours})
			}
		}
	}
	return cs
}

// recordOptions are the record options of seal (see benchCase).
func recordOptions(seal string) progcache.RecordOptions {
	switch seal {
	case "gmac":
		return progcache.RecordOptions{MACKey: testMAC}
	case "hmac":
		return progcache.RecordOptions{MACKey: testMAC, MAC: progcache.MACHash}
	}
	return progcache.RecordOptions{}
}

// benchSetup is a cache for one benchCase, the raw client beside it that
// the baseline uses (the same kind of client, its own pool), and the key,
// object and record bytes both sides move.
type benchSetup struct {
	c      *redistier.Cache
	raw    *redis.Client
	k      progcache.Key
	obj    progcache.Object
	record []byte
}

func newBenchSetup(b *testing.B, srv *redistest.Server, bc benchCase) benchSetup {
	opts := redistier.Options{Record: recordOptions(bc.seal), TrustedNetworkNoMAC: bc.seal == "crc", Timeout: 5 * time.Second}
	s := benchSetup{c: openCache(b, clientOf(b, srv.Addr, bc.honours), opts), raw: clientOf(b, srv.Addr, bc.honours), k: cachetest.KeyN(1), obj: cachetest.ObjectN(1, bc.size)}
	var err error
	if s.record, err = progcache.EncodeRecord(s.k, s.obj, opts.Record); err != nil {
		b.Fatal(err)
	}
	return s
}

// rawGet is the baseline of a hit: a raw GET of the record bytes.
func (s benchSetup) rawGet() error {
	v, err := s.raw.Get(bg, "bench:raw").Bytes()
	if err == nil && len(v) != len(s.record) {
		err = fmt.Errorf("raw GET returned %d bytes, want %d", len(v), len(s.record))
	}
	return err
}

// rawSet is the baseline of a put: a raw SET of the record bytes.
func (s benchSetup) rawSet() error {
	return s.raw.Set(bg, "bench:raw", s.record, 0).Err()
}

// stored puts the object in the cache and its record under the raw key.
func (s benchSetup) stored(b *testing.B) benchSetup {
	if err := s.c.Put(bg, s.k, s.obj); err != nil {
		b.Fatal(err)
	}
	if err := s.rawSet(); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkGet times a remote hit (Cache.Get: GET and record check; the
// code is handed over in the reply's bytes) and, in rounds whose order
// alternates on the same loopback server, the baseline: a raw go-redis
// GET of the same record bytes under another key. better-than-raw-x, the
// raw GET's time over ours, shows our overhead (issue goal: at most 1.2x
// the raw GET's time at 64 KiB, sealed: better-than-raw-x >= 0.833).
func BenchmarkGet(b *testing.B) {
	srv := redistest.Start(b)
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			s := newBenchSetup(b, srv, bc).stored(b)
			besideRaw(b, len(s.record), "get", func() error {
				if _, ok, err := s.c.Get(bg, s.k); err != nil {
					return err
				} else if !ok {
					return errors.New("miss")
				}
				return nil
			}, s.rawGet)
		})
	}
}

// BenchmarkPut times Cache.Put (record encoding with its checksum or MAC,
// then SET) and, in rounds whose order alternates, the baseline: a raw
// go-redis SET of the same record bytes. better-than-raw-x, the raw SET's
// time over ours, shows our overhead (issue goal: at most 1.2x the raw
// SET's time at 64 KiB, sealed: better-than-raw-x >= 0.833).
func BenchmarkPut(b *testing.B) {
	srv := redistest.Start(b)
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			s := newBenchSetup(b, srv, bc)
			besideRaw(b, len(s.record), "put", func() error { return s.c.Put(bg, s.k, s.obj) }, s.rawSet)
		})
	}
}

// besideRaw runs ours and raw in rounds whose order alternates
// (cachetest.Versus) and reports the medians of what-ns/op and
// raw-ns/op, and better-than-raw-x (raw's time over ours) with its 10th
// and 90th percentiles. Either failing ends the benchmark.
func besideRaw(b *testing.B, size int, what string, ours, raw func() error) {
	b.SetBytes(int64(2 * size)) // a round moves the bytes twice
	cachetest.Versus(b, 1, cachetest.Side{Name: what, Run: func() {
		if err := ours(); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
	}}, cachetest.Side{Name: "raw", Run: func() {
		if err := raw(); err != nil {
			b.Fatalf("raw: %v", err)
		}
	}})
}

// BenchmarkPrefetch times a Prefetch of 1,000 stored keys of 4 KiB and,
// alternately in the same loop, the baseline: 1,000 Cache.Get calls of
// the same keys, one round trip each. better-than-gets-x, the Gets' time
// over the Prefetch's, is the warm start's saving.
func BenchmarkPrefetch(b *testing.B) {
	srv := redistest.Start(b)
	c := openCache(b, srv.Client(b), redistier.Options{Timeout: 5 * time.Second})
	keys := make([]progcache.Key, 1000)
	for i := range keys {
		keys[i] = cachetest.KeyN(i)
		if err := c.Put(bg, keys[i], cachetest.ObjectN(i, 4<<10)); err != nil {
			b.Fatal(err)
		}
	}
	var pre, gets time.Duration
	for b.Loop() {
		t0 := time.Now()
		n, err := c.Prefetch(bg, keys, func(progcache.Key, progcache.Object) error { return nil })
		if n != len(keys) || err != nil {
			b.Fatal(n, err)
		}
		t1 := time.Now()
		for _, k := range keys {
			if _, ok, err := c.Get(bg, k); !ok || err != nil {
				b.Fatal("miss", err)
			}
		}
		pre += t1.Sub(t0)
		gets += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(pre.Nanoseconds())/n, "prefetch-ns/op")
	b.ReportMetric(float64(gets.Nanoseconds())/n, "gets-ns/op")
	b.ReportMetric(cachetest.BetterThan(gets, pre), cachetest.BetterThanMetric("gets"))
}

// BenchmarkParallelGet times 32 goroutines each making 16 Cache.Get hits
// of 64 KiB entries and, alternately in the same loop, the baseline: the
// same goroutines making 16 raw GETs each of the same record bytes.
// Reports both throughputs and better-than-raw-x (the raw round's time
// over ours: our throughput over raw's).
func BenchmarkParallelGet(b *testing.B) {
	const goroutines, perG, size = 32, 16, 64 << 10
	srv := redistest.Start(b)
	s := newBenchSetup(b, srv, benchCase{size: size, seal: "gmac"}).stored(b)
	c, raw, k := s.c, s.raw, s.k
	round := func(get func() error) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range perG {
					if err := get(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	var ours, base time.Duration
	for b.Loop() {
		ours += round(func() error {
			if _, ok, err := c.Get(bg, k); !ok || err != nil {
				return fmt.Errorf("miss: %w", err)
			}
			return nil
		})
		base += round(func() error { return raw.Get(bg, "bench:raw").Err() })
	}
	ops := float64(b.N * goroutines * perG)
	b.ReportMetric(ops/ours.Seconds(), "get-ops/s")
	b.ReportMetric(ops/base.Seconds(), "raw-ops/s")
	b.ReportMetric(cachetest.BetterThan(base, ours), cachetest.BetterThanMetric("raw"))
}

// BenchmarkRecordWork times the work on a record that a remote Get and
// Put cannot avoid, beside the raw calls they are measured against,
// alternately in one loop on the same loopback server with a deadline
// client: in get/..., progcache.ViewRecord of a fetched record (its
// CRC-32C, HMAC-SHA-256 or AES-GMAC pass, and its structure) beside a raw GET of
// the same bytes; in set/..., progcache.AppendRecord into a reused buffer
// (the copy of the code and the check) beside a raw SET of them. Here
// better-than-raw-x is the raw call's time over the record work's: the
// work costs 1/better-than-raw-x of a raw call, the least that
// BenchmarkGet's and BenchmarkPut's time can exceed the raw call's by.
// Where it is under 5 (the work over 0.2 of a raw call), the issue's
// "at most 1.2x the raw call's time" is out of reach for that record kind
// on this machine.
func BenchmarkRecordWork(b *testing.B) {
	srv := redistest.Start(b)
	for _, bc := range benchCases() {
		if !bc.honours {
			continue // the record work does not depend on the client
		}
		s := newBenchSetup(b, srv, bc).stored(b)
		opts := recordOptions(bc.seal)
		name := strings.TrimSuffix(bc.name, "/ctx-deadline-client")
		b.Run("get/"+name, func(b *testing.B) {
			besideRaw(b, len(s.record), "check", func() error {
				_, _, err := progcache.ViewRecord(s.record, opts)
				return err
			}, s.rawGet)
		})
		b.Run("set/"+name, func(b *testing.B) {
			buf := make([]byte, 0, len(s.record))
			besideRaw(b, len(s.record), "encode", func() error {
				var err error
				buf, err = progcache.AppendRecord(buf[:0], s.k, s.obj, opts)
				return err
			}, s.rawSet)
		})
	}
}
