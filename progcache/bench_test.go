package progcache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/blake2b"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/bolt"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/filestream"
	"github.com/accelkit/accelkit/progcache/tiered"
)

const benchSize = 64 << 10

type benchBackend struct {
	name string
	open func(b *testing.B) progcache.Cache
}

func benchBackends() []benchBackend {
	fsOpen := func(sync bool) func(b *testing.B) progcache.Cache {
		return func(b *testing.B) progcache.Cache {
			c, err := filestream.Open(b.TempDir(), filestream.Options{Sync: sync})
			if err != nil {
				b.Fatal(err)
			}
			return c
		}
	}
	boltOpen := func(noSync bool) func(b *testing.B) progcache.Cache {
		return func(b *testing.B) progcache.Cache {
			c, err := bolt.Open(filepath.Join(b.TempDir(), "c.db"), bolt.Options{NoSync: noSync})
			if err != nil {
				b.Fatal(err)
			}
			return c
		}
	}
	return []benchBackend{
		{"memory", func(b *testing.B) progcache.Cache { c, _ := progcache.NewMemory(progcache.MemoryOptions{}); return c }},
		{"filestream", fsOpen(false)},
		{"filestream-sync", fsOpen(true)},
		{"bolt", boltOpen(false)},
		{"bolt-nosync", boltOpen(true)},
	}
}

func BenchmarkGet64KiB(b *testing.B) {
	ctx := context.Background()
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			c := be.open(b)
			defer c.Close()
			obj := cachetest.ObjectN(1, benchSize)
			c.Put(ctx, cachetest.KeyN(1), obj)
			b.SetBytes(benchSize)
			for b.Loop() {
				if _, ok, err := c.Get(ctx, cachetest.KeyN(1)); !ok || err != nil {
					b.Fatal("miss", err)
				}
			}
		})
	}
}

func BenchmarkPut64KiB(b *testing.B) {
	ctx := context.Background()
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			c := be.open(b)
			defer c.Close()
			obj := cachetest.ObjectN(1, benchSize)
			b.SetBytes(benchSize)
			i := 0
			for b.Loop() {
				// Distinct keys, as cuda.core's "1000 distinct puts".
				if err := c.Put(ctx, cachetest.KeyN(i%1000), obj); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkMakeKey times MakeKey and the raw hash of its source bytes
// (crypto/sha256.Sum256 for the default digest, blake2b.Sum256 for
// DigestBlake2b256) in rounds whose order alternates (cachetest.Versus),
// and reports the medians and better-than-raw-x (raw's time over the
// key's) with its spread: what the key costs beyond hashing the bytes it
// names (issue goal: at most 1.1x raw's time for SHA-256 at 56 KiB and 1
// MiB, better-than-raw-x >= 0.909). Timing MakeKey first in every round, as this
// benchmark once did, left the raw hash the bytes in the CPU's caches.
func BenchmarkMakeKey(b *testing.B) {
	for _, size := range []int{56 << 10, 1 << 20} {
		for _, d := range []struct {
			name string
			kind progcache.DigestKind
			raw  func([]byte) [32]byte
		}{
			{"sha256", progcache.DigestSHA256, sha256.Sum256},
			{"blake2b", progcache.DigestBlake2b256, blake2b.Sum256},
		} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, d.name), func(b *testing.B) {
				src := bytes.Repeat([]byte("x = y + z; "), size/11+1)[:size]
				in := progcache.KeyInput{
					Sources:   []progcache.Source{{Name: "k.cu", Code: src}},
					CodeType:  "c++",
					Target:    "cubin",
					Options:   progcache.Options{Arch: "sm_90", Std: "c++17", Extra: []string{"-G", "-DN=4", "--fmad=false"}},
					Toolchain: []progcache.Component{{Name: "nvrtc", Version: "13.0"}, {Name: "driver", Version: "580"}},
					Digest:    d.kind,
				}
				b.SetBytes(int64(size))
				cachetest.Versus(b, 1, cachetest.Side{Name: "key", Run: func() {
					if _, err := progcache.MakeKey(in); err != nil {
						b.Fatal(err)
					}
				}}, cachetest.Side{Name: "raw", Run: func() { d.raw(src) }})
			})
		}
	}
}

// BenchmarkGetOrCompileCC compiles a small C file with the system `cc -c`
// on a miss and reports the miss and hit costs and how many times better
// a hit is than a miss (better-than-miss-x, the miss's time over the
// hit's).
func BenchmarkGetOrCompileCC(b *testing.B) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		b.Skip("no system cc")
	}
	ctx := context.Background()
	c, err := filestream.Open(b.TempDir(), filestream.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	work := b.TempDir()
	var miss, hit time.Duration
	n := 0
	for b.Loop() {
		src := []byte(fmt.Sprintf("int f%d(int x) { return x * %d + 1; }\n", n, n))
		k, err := progcache.MakeKey(progcache.KeyInput{
			Sources:  []progcache.Source{{Name: "f.c", Code: src}},
			CodeType: "c", Target: "elf",
			Options:   progcache.Options{Extra: []string{"-O2"}},
			Toolchain: []progcache.Component{{Name: "cc", Version: cc}},
		})
		if err != nil {
			b.Fatal(err)
		}
		compile := func(ctx context.Context) (progcache.Object, error) {
			in, out := filepath.Join(work, "f.c"), filepath.Join(work, "f.o")
			if err := os.WriteFile(in, src, 0o600); err != nil {
				return progcache.Object{}, err
			}
			if msg, err := exec.CommandContext(ctx, cc, "-O2", "-c", in, "-o", out).CombinedOutput(); err != nil {
				return progcache.Object{}, fmt.Errorf("cc: %w: %s", err, msg)
			}
			code, err := os.ReadFile(out)
			return progcache.Object{Kind: "elf", Name: "f.c", Code: code}, err
		}
		t0 := time.Now()
		if _, err := progcache.GetOrCompile(ctx, c, k, compile); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := progcache.GetOrCompile(ctx, c, k, compile); err != nil {
			b.Fatal(err)
		}
		miss += t1.Sub(t0)
		hit += time.Since(t1)
		n++
	}
	b.ReportMetric(float64(miss.Nanoseconds())/float64(n), "miss-ns/op")
	b.ReportMetric(float64(hit.Nanoseconds())/float64(n), "hit-ns/op")
	b.ReportMetric(float64(miss)/float64(hit), "better-than-miss-x")
}

// BenchmarkBaseline measures the floor the cache operations sit on, in the
// same run: a raw SHA-256 and blake2b-256 of the MakeKey source, a plain
// 64 KiB file read, and a 64 KiB write + rename without fsync.
func BenchmarkBaseline(b *testing.B) {
	b.Run("sha256-56KiB", func(b *testing.B) {
		src := bytes.Repeat([]byte("x = y + z; "), 56<<10/11+1)[:56<<10]
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			sha256.Sum256(src)
		}
	})
	b.Run("blake2b-56KiB", func(b *testing.B) {
		src := bytes.Repeat([]byte("x = y + z; "), 56<<10/11+1)[:56<<10]
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			blake2bSum(src)
		}
	})
	b.Run("readfile-64KiB", func(b *testing.B) {
		p := filepath.Join(b.TempDir(), "f")
		os.WriteFile(p, make([]byte, benchSize), 0o600)
		b.SetBytes(benchSize)
		for b.Loop() {
			if _, err := os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write-rename-64KiB", func(b *testing.B) {
		dir := b.TempDir()
		data := make([]byte, benchSize)
		b.SetBytes(benchSize)
		i := 0
		for b.Loop() {
			tmp := filepath.Join(dir, "tmp")
			if err := os.WriteFile(tmp, data, 0o600); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprint(i%1000))); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func blake2bSum(b []byte) [32]byte { return blake2b.Sum256(b) }

// BenchmarkTieredGetLocalHit times a Tiered cache's Get of an entry it
// backfilled from its remote tier (so a local hit) against a Get of the
// same entry from the local tier alone, the baseline, in rounds of 64 of
// each whose order alternates (cachetest.Versus), and reports the medians
// and better-than-local-x (the local tier's time over tiered's) with its
// spread: what the tiering costs a hit (issue goal: at most 1.1x the
// local tier's time, better-than-local-x >= 0.909),
// for a memory and a filestream local tier. The remote tier is a memory
// cache; a local hit does not touch it.
func BenchmarkTieredGetLocalHit(b *testing.B) {
	const batch = 64
	ctx := context.Background()
	for _, be := range benchBackends()[:2] { // memory, filestream
		b.Run(be.name, func(b *testing.B) {
			local := be.open(b)
			remote, _ := progcache.NewMemory(progcache.MemoryOptions{})
			c, err := tiered.New(local, remote, tiered.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			k := cachetest.KeyN(1)
			remote.Put(ctx, k, cachetest.ObjectN(1, benchSize))
			if _, ok, err := c.Get(ctx, k); !ok || err != nil {
				b.Fatal("remote miss", err)
			}
			if s := c.TierStats(); s.Backfills != 1 {
				b.Fatalf("the remote hit was not backfilled: %+v", s)
			}
			get := func(c progcache.Cache, what string) func() {
				return func() {
					if _, ok, err := c.Get(ctx, k); !ok || err != nil {
						b.Fatal(what, " miss ", err)
					}
				}
			}
			cachetest.Versus(b, batch, cachetest.Side{Name: "tiered", Run: get(c, "tiered")}, cachetest.Side{Name: "local", Run: get(local, "local")})
			if s := c.TierStats(); s.RemoteHits != 1 {
				b.Fatalf("hits after the backfill went to the remote tier: %+v", s)
			}
		})
	}
}

// BenchmarkView measures a 64 KiB View hit on each backend with
// -benchmem's allocation count (goal: 0 allocs/op on memory and bolt).
func BenchmarkView(b *testing.B) {
	ctx := context.Background()
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			c := be.open(b)
			defer c.Close()
			k := cachetest.KeyN(1)
			if err := c.Put(ctx, k, cachetest.ObjectN(1, benchSize)); err != nil {
				b.Fatal(err)
			}
			v := c.(progcache.Viewer)
			if strings.HasPrefix(be.name, "filestream") {
				time.Sleep(2100 * time.Millisecond) // past the racy window (filestream's BenchmarkFileStreamViewVsPread)
			}
			var sum int
			fn := func(v progcache.View) error { sum += len(v.Code()); return nil }
			v.View(ctx, k, fn)
			b.ReportAllocs()
			b.SetBytes(benchSize)
			for b.Loop() {
				if ok, err := v.View(ctx, k, fn); !ok || err != nil {
					b.Fatal("miss", err)
				}
			}
		})
	}
}
