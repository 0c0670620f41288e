//go:build linux && cgo

package cuda

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// BenchmarkShimFake measures the backend's per-call cost on the fake
// libcuda, whose entry points cost a few nanoseconds: what remains is the
// shim (cgo call, context check, Go-side checks).
func BenchmarkShimFake(b *testing.B) {
	l := buildFake(b, nil)
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
// raw-ns/op (driver alone), shim-ns/op (the difference) and
// better-than-raw-x (the raw call's time over the backend's: how many
// times better than the raw call, at most 1).
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
			b.ReportMetric(raw/shim, "better-than-raw-x")
		})
	}
}

// BenchmarkHostRegisterReal measures host registration on the real driver,
// where one is installed with a device (skipped elsewhere), for 1, 16 and
// 64 MiB of Go memory. Each iteration registers a buffer
// (cuMemHostRegister_v2), copies it to the device asynchronously and
// waits, copies a HostAlloc buffer of the same size the same way (the
// baseline a staging copy lands in), copies a pageable Go buffer with
// CopyHtoDSync (what a caller without pinned memory gets), and
// unregisters; the three copies are interleaved so they see the same
// machine. It reports the registration's cost per MiB
// (register-us/MiB, HostRegister+HostUnregister), the three rates, and the
// registered copy's rate over the HostAlloc one's
// (better-than-hostalloc-x) and over the pageable one's
// (better-than-pageable-x).
func BenchmarkHostRegisterReal(b *testing.B) {
	drv := openReal(b)
	defer drv.Close()
	benchHostRegister(b, drv.(*cudaDriver))
}

func benchHostRegister(b *testing.B, drv *cudaDriver) {
	d := drv.devs[0]
	hr := hostRegOps{d}
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	for _, mib := range []int{1, 16, 64} {
		b.Run(fmt.Sprint(mib, "MiB"), func(b *testing.B) {
			n := mib << 20
			p, err := d.Malloc(uint64(n))
			if err != nil {
				b.Fatal(err)
			}
			defer d.Free(p)
			pinned, err := d.HostAlloc(n)
			if err != nil {
				b.Fatal(err)
			}
			defer d.HostFree(pinned)
			mem, pageable := make([]byte, n), make([]byte, n)
			for i := range mem {
				mem[i], pageable[i] = byte(i), byte(i)
			}
			copy(pinned.Bytes(), mem)
			async := func(src []byte) time.Duration {
				t0 := time.Now()
				if err := d.CopyHtoD(p, src, s); err != nil {
					b.Fatal(err)
				}
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			// Warm every path once, so that no timed copy pays for the first
			// touch of the device memory.
			warm, err := hr.HostRegister(mem)
			if err != nil {
				b.Fatal(err)
			}
			async(warm.Bytes())
			async(pinned.Bytes())
			if err := errors.Join(d.CopyHtoDSync(p, pageable), hr.HostUnregister(warm)); err != nil {
				b.Fatal(err)
			}
			var regT, regCopyT, allocT, pageT time.Duration
			for b.Loop() {
				t0 := time.Now()
				reg, err := hr.HostRegister(mem)
				if err != nil {
					b.Fatal(err)
				}
				regT += time.Since(t0)
				regCopyT += async(reg.Bytes())
				allocT += async(pinned.Bytes())
				t1 := time.Now()
				if err := d.CopyHtoDSync(p, pageable); err != nil {
					b.Fatal(err)
				}
				pageT += time.Since(t1)
				t2 := time.Now()
				if err := hr.HostUnregister(reg); err != nil {
					b.Fatal(err)
				}
				regT += time.Since(t2)
			}
			gbs := func(t time.Duration) float64 { return float64(n) * float64(b.N) / t.Seconds() / 1e9 }
			b.ReportMetric(regT.Seconds()*1e6/float64(b.N)/float64(mib), "register-us/MiB")
			b.ReportMetric(gbs(regCopyT), "registered-GB/s")
			b.ReportMetric(gbs(allocT), "hostalloc-GB/s")
			b.ReportMetric(gbs(pageT), "pageable-GB/s")
			b.ReportMetric(allocT.Seconds()/regCopyT.Seconds(), "better-than-hostalloc-x")
			b.ReportMetric(pageT.Seconds()/regCopyT.Seconds(), "better-than-pageable-x")
		})
	}
}

// BenchmarkLaunchFake times Kernel.Launch against a raw cuLaunchKernel
// loop in C, in the same run, on the fake libcuda: the fake's launch costs
// little (a handle lookup and accelkit_scale over n = 0 elements), so the
// figures are the backend's overhead per launch, not a GPU's launch
// latency. It reports raw-ns/op (the C loop), shim-ns/op (the difference)
// and better-than-raw-x (the raw loop's time over the backend's; the goal
// on a GPU is at most 1.1x the raw time, a ratio of at least 0.909).
func BenchmarkLaunchFake(b *testing.B) {
	l := buildFake(b, nil)
	benchLaunch(b, openFake(b, l))
}

// BenchmarkLaunchReal is the same on the real driver, where one is
// installed with a device (skipped elsewhere): an empty accelkit_scale
// launch (n = 0) on a stream, which measures the launch path itself.
func BenchmarkLaunchReal(b *testing.B) {
	drv := openReal(b)
	defer drv.Close()
	benchLaunch(b, drv.(*cudaDriver))
}

func benchLaunch(b *testing.B, drv *cudaDriver) {
	d := drv.devs[0]
	m := loadKernels(b, launcher(b, drv, 0), drivertest.KernelPTX)
	k := kernelOf(b, m, drivertest.KernelScale).(*kernel)
	x, err := d.Malloc(4)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Free(x)
	s, err := d.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	cfg := driver.LaunchConfig{Grid: driver.Dim3{X: 1}, Block: driver.Dim3{X: 32}}
	args := new(driver.Args)
	b.ReportAllocs()
	for b.Loop() {
		args.Reset()
		args.Ptr(x).Float32(1).Int32(0)
		if err := k.Launch(s, cfg, args); err != nil {
			b.Fatal(err)
		}
	}
	shim := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	n := max(b.N, 100)
	start := time.Now()
	if err := RawLaunchLoop(k, s, cfg, args, n); err != nil {
		b.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	raw := float64(time.Since(start).Nanoseconds()) / float64(n)
	b.ReportMetric(raw, "raw-ns/op")
	b.ReportMetric(shim-raw, "shim-ns/op")
	b.ReportMetric(raw/shim, "better-than-raw-x")
}
