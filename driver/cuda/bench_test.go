//go:build linux && cgo

package cuda

import (
	"testing"
	"time"

	"github.com/accelkit/accelkit/driver/cuda/internal/fakecuda"
)

// BenchmarkShimFake measures the backend's per-call cost on the fake
// libcuda, whose entry points cost a few nanoseconds: what remains is the
// shim (cgo call, context check, Go-side checks).
func BenchmarkShimFake(b *testing.B) {
	l := fakecuda.Build(b, nil)
	benchShim(b, openFake(b, l))
}

// BenchmarkShimReal measures the same operations on the real driver, where
// one is installed with a device (skipped elsewhere).
func BenchmarkShimReal(b *testing.B) {
	drv := openReal(b)
	defer drv.Close()
	benchShim(b, drv.(*cudaDriver))
}

// benchShim times each operation through the backend and, in the same run,
// the raw driver call repeated in C (rawLoop). It reports ns/op (backend),
// raw-ns/op (driver alone), shim-ns/op (the difference) and x-raw (the
// ratio).
func benchShim(b *testing.B, drv *cudaDriver) {
	d := drv.devs[0]
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	ev, err := d.NewEvent()
	if err != nil {
		b.Fatal(err)
	}
	defer ev.Destroy()
	st, e := s.(*stream), ev.(*event)
	if err := e.Record(s); err != nil {
		b.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		call func() error
		raw  rawOp
		size uint64
	}{
		{"ContextCheck", d.ctxCheck, rawCtxGet, 0},
		{"EventQuery", func() error { _, err := e.Query(); return err }, rawEventQuery, 0},
		{"StreamQuery", func() error { _, err := s.Query(); return err }, rawStreamQuery, 0},
		{"EventRecord", func() error { return e.Record(s) }, rawEventRecord, 0},
		{"MallocFree512", func() error {
			p, err := d.Malloc(512)
			if err != nil {
				return err
			}
			return d.Free(p)
		}, rawMallocFree, 512},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
			}
			shim := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
			n := max(b.N, 100)
			start := time.Now()
			if err := d.rawLoop(c.raw, n, e, st, c.size); err != nil {
				b.Fatal(err)
			}
			raw := float64(time.Since(start).Nanoseconds()) / float64(n)
			b.ReportMetric(raw, "raw-ns/op")
			b.ReportMetric(shim-raw, "shim-ns/op")
			b.ReportMetric(shim/raw, "x-raw")
		})
	}
}
