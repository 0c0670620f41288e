package hostpin

import (
	"context"
	"fmt"
	"testing"
	"time"

	_ "github.com/accelkit/accelkit/driver/cuda" // a `go test -c` binary measures CUDA with ACCELKIT_DRIVER=cuda
	"github.com/accelkit/accelkit/driver/drivertest"
	_ "github.com/accelkit/accelkit/driver/sim"
)

// perOp runs f once untimed, then at least minN times and until budget has
// passed, and returns
// the mean time per call: the side measurement that a benchmark's own
// b.Loop figure is compared with.
func perOp(b *testing.B, minN int, budget time.Duration, f func() error) time.Duration {
	b.Helper()
	if err := f(); err != nil { // first touch of the pages is not the copy's cost
		b.Fatal(err)
	}
	t0 := time.Now()
	n := 0
	for n < minN || time.Since(t0) < budget {
		if err := f(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	return time.Since(t0) / time.Duration(n)
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkAllocFree: a cached Alloc+Free pair against a fresh driver
// HostAlloc+HostFree of the same size, in one run; speedup-x is the ratio.
func BenchmarkAllocFree(b *testing.B) {
	dev := drivertest.OpenDevice(b)
	for _, n := range []int{64 << 10, 1 << 20, 64 << 20} {
		b.Run(sizeName(n), func(b *testing.B) {
			a, err := New(dev, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			fresh := perOp(b, 3, 100*time.Millisecond, func() error {
				hb, err := dev.HostAlloc(n)
				if err != nil {
					return err
				}
				return dev.HostFree(hb)
			})
			warm, err := a.Alloc(n)
			if err != nil {
				b.Fatal(err)
			}
			a.Free(warm)
			for b.Loop() {
				buf, err := a.Alloc(n)
				if err != nil {
					b.Fatal(err)
				}
				a.Free(buf)
			}
			cached := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(fresh.Nanoseconds()), "fresh-ns/op")
			b.ReportMetric(float64(fresh)/float64(max(cached, 1)), "speedup-x")
		})
	}
}

// BenchmarkAllocFreeParallel: the cached pair from every P at once (one
// lock; shows contention).
func BenchmarkAllocFreeParallel(b *testing.B) {
	dev := drivertest.OpenDevice(b)
	a, err := New(dev, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			buf, err := a.Alloc(64 << 10)
			if err != nil {
				b.Error(err)
				return
			}
			a.Free(buf)
		}
	})
}

// BenchmarkRoundingWaste reports the handed-out/requested ratio of fresh
// allocations over 100,000 sizes spread evenly on a log scale from 4 KiB
// to 256 MiB (computed with the allocator's rounding, without allocating).
func BenchmarkRoundingWaste(b *testing.B) {
	for _, d := range []int{4, 8} {
		b.Run(fmt.Sprintf("classes=%d", d), func(b *testing.B) {
			a := &Allocator{perDbl: d, pageSize: 4096, opts: Options{PageOnlyThreshold: defaultPageOnlyThreshold}}
			var mean, worst float64
			for b.Loop() {
				mean, worst = roundingWaste(a, 4<<10, 256<<20, 100_000)
			}
			b.ReportMetric(mean, "mean-ratio")
			b.ReportMetric(worst, "max-ratio")
		})
	}
}

// BenchmarkCopyHtoD: staged CopyHtoD (until the stream has finished) from
// pageable Go memory against the driver's CopyHtoDSync from the same
// memory, and against the ceiling: the Stager's own workers copying the
// same bytes pageable -> pinned with no DMA. On sim every copy is a memcpy,
// so staged-vs-direct there shows the Stager's overhead only.
func BenchmarkCopyHtoD(b *testing.B) {
	dev := drivertest.OpenDevice(b)
	a, err := New(dev, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	sg, err := NewStager(a, StagerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	st, err := dev.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer st.Destroy()
	ctx := context.Background()
	for _, n := range []int{64 << 10, 1 << 20, 16 << 20, 256 << 20} {
		b.Run(sizeName(n), func(b *testing.B) {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(i * 7)
			}
			dptr, err := dev.Malloc(uint64(n))
			if err != nil {
				b.Fatal(err)
			}
			defer dev.Free(dptr)
			pinned, err := a.Alloc(n)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Free(pinned)

			budget := 100 * time.Millisecond
			direct := perOp(b, 3, budget, func() error { return dev.CopyHtoDSync(dptr, src) })
			ceiling := perOp(b, 3, budget, func() error { sg.hostCopy(pinned.Bytes(), src); return nil })
			staged := func() error {
				if err := sg.CopyHtoD(ctx, dptr, src, st); err != nil {
					return err
				}
				return st.Synchronize()
			}
			if err := staged(); err != nil { // warm the chunk cache
				b.Fatal(err)
			}
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := staged(); err != nil {
					b.Fatal(err)
				}
			}
			per := b.Elapsed() / time.Duration(b.N)
			gbps := func(d time.Duration) float64 { return float64(n) / d.Seconds() / 1e9 }
			b.ReportMetric(gbps(per), "staged-GB/s")
			b.ReportMetric(gbps(direct), "direct-GB/s")
			b.ReportMetric(gbps(ceiling), "ceiling-GB/s")
			b.ReportMetric(float64(direct)/float64(per), "staged/direct-x")
			b.ReportMetric(float64(ceiling)/float64(per), "staged/ceiling")
		})
	}
}

// BenchmarkCopyDtoH: the same for the other direction (no ceiling).
func BenchmarkCopyDtoH(b *testing.B) {
	dev := drivertest.OpenDevice(b)
	a, err := New(dev, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	sg, err := NewStager(a, StagerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	st, err := dev.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer st.Destroy()
	ctx := context.Background()
	for _, n := range []int{1 << 20, 16 << 20, 256 << 20} {
		b.Run(sizeName(n), func(b *testing.B) {
			dst := make([]byte, n)
			dptr, err := dev.Malloc(uint64(n))
			if err != nil {
				b.Fatal(err)
			}
			defer dev.Free(dptr)
			direct := perOp(b, 3, 100*time.Millisecond, func() error { return dev.CopyDtoHSync(dst, dptr) })
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := sg.CopyDtoH(ctx, dst, dptr, st); err != nil {
					b.Fatal(err)
				}
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(n)/per.Seconds()/1e9, "staged-GB/s")
			b.ReportMetric(float64(n)/direct.Seconds()/1e9, "direct-GB/s")
			b.ReportMetric(float64(direct)/float64(per), "staged/direct-x")
		})
	}
}
