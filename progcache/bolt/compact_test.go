package bolt

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// fileBoundWorkload puts total bytes of entries into a cache capped at
// maxBytes, entry code sizes drawn by size, and returns the largest file
// size seen after a Put returned.
func fileBoundWorkload(t testing.TB, p string, maxBytes, total int64, size func(r *rand.Rand) int) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := Open(p, quietBolt(Options{MaxBytes: maxBytes, NoSync: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(1, 2))
	var most int64
	for n, put := 0, int64(0); put < total; n++ {
		sz := size(r)
		if err := c.Put(ctx, testKey(n), testObject(n, sz)); err != nil {
			t.Fatal(err)
		}
		put += int64(sz)
		if n%4 == 0 {
			c.Get(ctx, testKey(n/2))
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, fi.Size())
	}
	return most
}

// TestBoltFileBounded: under a byte cap the file stays within the bound
// compact.go states, 2 x the pages in use + growStep, which under a 4 MiB
// cap is under 2 x MaxBytes + growStep + 1 MiB of bbolt's overhead. Before
// compaction bbolt kept every freed page: 16 MiB after 100 MiB of puts of
// 1 KiB-1 MiB entries (scaled down here to 24 MiB).
func TestBoltFileBounded(t *testing.T) {
	const maxBytes = 4 << 20
	bound := int64(2*maxBytes + growStep(maxBytes) + 1<<20)
	for _, tc := range []struct {
		name string
		size func(r *rand.Rand) int
	}{
		// The review's workload; 64 KiB and 1-16 KiB entries stayed at 8
		// MiB before (see BenchmarkBoltCompact for those files).
		{"1KiB-1MiB", func(r *rand.Rand) int { return 1<<10 + r.IntN(1<<20-1<<10) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "cache.db")
			most := fileBoundWorkload(t, p, maxBytes, 24<<20, tc.size)
			t.Logf("largest file after a put: %.1f MiB (bound %.1f MiB)", float64(most)/(1<<20), float64(bound)/(1<<20))
			if most > bound {
				t.Errorf("file reached %d bytes at a %d-byte cap; bound %d", most, maxBytes, bound)
			}
			if m, _ := filepath.Glob(p + ".compact-*"); len(m) != 0 {
				t.Errorf("compaction left %v", m)
			}
		})
	}
}

// compactNow compacts c's file whatever its free pages.
func compactNow(t testing.TB, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.compactLocked(); err != nil {
		t.Fatal(err)
	}
}

// TestBoltCompactKeepsEverything: a compaction shrinks the file and keeps
// every entry, its access time (the LRU order) and the counters, while
// readers run beside it; the new file passes the open check.
func TestBoltCompactKeepsEverything(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cache.db")
	c := openCache(t, p, Options{NoSync: true})
	const n = 200
	for i := range n {
		if err := c.Put(ctx, testKey(i), testObject(i, 8<<10)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 4 {
		if _, ok, _ := c.Get(ctx, testKey(i)); !ok {
			t.Fatalf("miss on %d", i)
		}
	}
	for i := 1; i < n; i += 4 {
		c.Delete(ctx, testKey(i))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; ; i += 2 {
				select {
				case <-stop:
					return
				default:
				}
				k := i % n
				_, ok, err := c.Get(ctx, testKey(k))
				if err != nil || ok != (k%4 != 1) {
					t.Errorf("Get %d during compaction: hit %v, %v", k, ok, err)
					return
				}
			}
		}()
	}
	before, _ := os.Stat(p)
	compactNow(t, c)
	close(stop)
	wg.Wait()
	after, _ := os.Stat(p)
	if after.Size() >= before.Size() || os.SameFile(before, after) {
		t.Errorf("file %d -> %d bytes, same file %v; want a smaller new file", before.Size(), after.Size(), os.SameFile(before, after))
	}
	order := func(c *Cache) []progcache.Key {
		es, err := c.Entries(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		var ks []progcache.Key
		for _, e := range es {
			ks = append(ks, e.Key)
		}
		return ks
	}
	want := order(c)
	if err := c.Put(ctx, testKey(n), testObject(n, 100)); err != nil {
		t.Fatalf("Put after compaction: %v", err)
	}
	want = append(want, testKey(n))
	s0 := c.Stats()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCache(t, p, Options{NoSync: true})
	if got := order(c); !slices.Equal(got, want) {
		t.Errorf("after compaction and reopening: %d entries in another order; want %d in the same", len(got), len(want))
	}
	if tot, err := c.Totals(ctx); err != nil || tot.Puts != s0.Puts || tot.Hits < s0.Hits {
		t.Errorf("counters after compaction: %+v, %v; want puts %d, hits %d", tot, err, s0.Puts, s0.Hits)
	}
}

// TestBoltCompactOtherProcessReopens: an open that waited for the lock of
// the file a compaction replaced must not use that file (its writes would
// be lost, its reads stale): it finds the path renamed and opens the new
// file. Opens of the same path in one process take separate flocks, as
// two processes do.
func TestBoltCompactOtherProcessReopens(t *testing.T) {
	if !boltRenameWhileOpen {
		t.Skip("no compaction on this platform")
	}
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "cache.db")
	a := openCache(t, p, Options{NoSync: true})
	for i := range 50 {
		a.Put(ctx, testKey(i), testObject(i, 4<<10))
	}
	type res struct {
		c   *Cache
		err error
	}
	got := make(chan res, 1)
	go func() {
		c, err := Open(p, quietBolt(Options{Timeout: 20 * time.Second}))
		got <- res{c, err}
	}()
	time.Sleep(300 * time.Millisecond) // b opened the old file and waits for its lock
	compactNow(t, a)
	if err := a.Put(ctx, testKey(99), testObject(99, 100)); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	if _, ok, err := r.c.Get(ctx, testKey(99)); !ok || err != nil {
		t.Errorf("the waiting open missed what was written after the compaction (hit %v, %v): it used the replaced file", ok, err)
	}
	if err := r.c.Put(ctx, testKey(100), testObject(100, 100)); err != nil {
		t.Fatal(err)
	}
	r.c.Close()
	c := openCache(t, p, Options{})
	if _, ok, _ := c.Get(ctx, testKey(100)); !ok {
		t.Error("a put by the waiting open was lost")
	}
}

// BenchmarkBoltCompact measures one compaction of a typical file (a 4 MiB
// cap filled past it, so that evictions left free pages) beside the
// baseline of copying the file with io.Copy, fsync off: what bbolt's walk,
// page fill and the swap add to moving the bytes. MB/s is of the compacted
// file (what each iteration copies); MiB-before is the file the workload
// left.
func BenchmarkBoltCompact(b *testing.B) {
	for _, tc := range []struct {
		name string
		size func(r *rand.Rand) int
	}{
		{"64KiB-entries", func(*rand.Rand) int { return 64 << 10 }},
		{"1KiB-16KiB-entries", func(r *rand.Rand) int { return 1<<10 + r.IntN(15<<10) }},
	} {
		dir := b.TempDir()
		p := filepath.Join(dir, "cache.db")
		fileBoundWorkload(b, p, 4<<20, 12<<20, tc.size)
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/compact", func(b *testing.B) {
			c, err := Open(p, quietBolt(Options{MaxBytes: 4 << 20, NoSync: true}))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			// From the first compaction on, the file compacted is the
			// compact one: MB/s is of that.
			compactNow(b, c)
			cfi, err := os.Stat(p)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(cfi.Size())
			for b.Loop() {
				compactNow(b, c)
			}
			b.ReportMetric(float64(fi.Size())/(1<<20), "MiB-before")
		})
		b.Run(tc.name+"/file-copy", func(b *testing.B) {
			cfi, err := os.Stat(p)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(cfi.Size())
			for b.Loop() {
				src, err := os.Open(p)
				if err != nil {
					b.Fatal(err)
				}
				dst, err := os.Create(filepath.Join(dir, "copy"))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(dst, src); err != nil {
					b.Fatal(err)
				}
				src.Close()
				dst.Close()
			}
		})
	}
}

// A compaction that dies before its rename (a crash, a kill) leaves its
// <path>.compact-<ns> file; the next read-write open removes it, and
// nothing else beside the cache.
func TestBoltOpenSweepsCompactTemps(t *testing.T) {
	if !boltRenameWhileOpen {
		t.Skip("no compaction on this platform")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "cache.db")
	c := openCache(t, path, Options{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	leftover := path + ".compact-1732700000000000000"
	keep := []string{
		path + ".compact-",      // no digits
		path + ".compact-12x",   // not ours
		path + ".compacted-123", // another name
		filepath.Join(dir, "other.db.compact-123"),
	}
	for _, p := range append([]string{leftover}, keep...) {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := path + ".compact-99"
	symlinkOrSkip(t, outside, link)
	keep = append(keep, link)

	ro, err := Open(path, quietBolt(Options{ReadOnly: true}))
	if err != nil {
		t.Fatal(err)
	}
	ro.Close()
	if _, err := os.Lstat(leftover); err != nil {
		t.Fatalf("a read-only open removed %s: %v", leftover, err)
	}

	c = openCache(t, path, Options{})
	defer c.Close()
	if _, err := os.Lstat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s left after a read-write open: %v", leftover, err)
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "theirs" {
		t.Errorf("the link's target changed: %q, %v", b, err)
	}
}
