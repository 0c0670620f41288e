package filestream_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/filestream"
)

// benchSize is the object size of the benchmarks: 64 KiB, a typical cubin.
const benchSize = 64 << 10

// fileStreamEntry opens a filestream Cache in a temporary directory (closed
// when b ends) holding one 64 KiB entry, and returns its key and the path
// of its file.
func fileStreamEntry(b *testing.B) (*filestream.Cache, progcache.Key, string) {
	dir := b.TempDir()
	c, err := filestream.Open(dir, filestream.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	k := cachetest.KeyN(1)
	if err := c.Put(context.Background(), k, cachetest.ObjectN(1, benchSize)); err != nil {
		b.Fatal(err)
	}
	return c, k, filepath.Join(dir, "entries", k.String()[:2], k.String())
}

// BenchmarkFileStreamGetVsReadFile times a filestream Cache hit and a plain
// os.ReadFile of the same entry file alternately in one loop, so both see
// the same machine load, and reports the hit's cost over the bare read.
func BenchmarkFileStreamGetVsReadFile(b *testing.B) {
	ctx := context.Background()
	c, k, p := fileStreamEntry(b)
	var get, read time.Duration
	n := 0
	b.SetBytes(benchSize)
	for b.Loop() {
		t0 := time.Now()
		if _, ok, err := c.Get(ctx, k); !ok || err != nil {
			b.Fatal("miss", err)
		}
		t1 := time.Now()
		if _, err := os.ReadFile(p); err != nil {
			b.Fatal(err)
		}
		get += t1.Sub(t0)
		read += time.Since(t1)
		n++
	}
	b.ReportMetric(float64(get.Nanoseconds())/float64(n), "get-ns/op")
	b.ReportMetric(float64(read.Nanoseconds())/float64(n), "readfile-ns/op")
	b.ReportMetric(float64(get-read)/float64(n), "extra-ns/op")
	b.ReportMetric(float64(get)/float64(read), "get/readfile")
}
