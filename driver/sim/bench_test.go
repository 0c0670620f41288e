package sim_test

import (
	"fmt"
	"testing"
	"time"
)

var benchSizes = []int{4 << 10, 1 << 20}

func BenchmarkMallocFree(b *testing.B) {
	drv := open(b, "")
	dev, _ := device(b, drv, 0)
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n>>10, "KiB"), func(b *testing.B) {
			for b.Loop() {
				p, err := dev.Malloc(uint64(n))
				if err != nil {
					b.Fatal(err)
				}
				if err := dev.Free(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkHostAllocFree(b *testing.B) {
	drv := open(b, "")
	dev, _ := device(b, drv, 0)
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n>>10, "KiB"), func(b *testing.B) {
			for b.Loop() {
				hb, err := dev.HostAlloc(n)
				if err != nil {
					b.Fatal(err)
				}
				if err := dev.HostFree(hb); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEventRoundTrip queues one small Memset, records an event behind
// it and waits for the event: the latency of a stream handoff.
func BenchmarkEventRoundTrip(b *testing.B) {
	drv := open(b, "")
	dev, _ := device(b, drv, 0)
	s, _ := dev.NewStream()
	ev, _ := dev.NewEvent()
	p := mustMalloc(b, dev, 64)
	for b.Loop() {
		if err := dev.Memset(p, 1, 64, s); err != nil {
			b.Fatal(err)
		}
		if err := ev.Record(s); err != nil {
			b.Fatal(err)
		}
		if err := ev.Synchronize(); err != nil {
			b.Fatal(err)
		}
		if done, err := ev.Query(); !done || err != nil {
			b.Fatal("event not done after Synchronize", err)
		}
	}
}

// BenchmarkRecordQuery records an event on an idle stream and queries it:
// the bookkeeping cost evpool pays per entry.
func BenchmarkRecordQuery(b *testing.B) {
	drv := open(b, "")
	dev, _ := device(b, drv, 0)
	s, _ := dev.NewStream()
	ev, _ := dev.NewEvent()
	for b.Loop() {
		if err := ev.Record(s); err != nil {
			b.Fatal(err)
		}
		if _, err := ev.Query(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopy times async copies (enqueue, run, Synchronize) against
// plain copy() of the same size between two pinned buffers, interleaved
// per iteration so that both see the same load on a shared machine; x-copy
// is the sim's bandwidth as a fraction of copy()'s.
func BenchmarkCopy(b *testing.B) {
	for _, dir := range []string{"HtoD", "DtoH"} {
		for _, n := range []int{64 << 10, 1 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", dir, n>>10), func(b *testing.B) {
				benchCopy(b, dir, n)
			})
		}
	}
}

func benchCopy(b *testing.B, dir string, n int) {
	drv := open(b, "")
	dev, _ := device(b, drv, 0)
	s, _ := dev.NewStream()
	p := mustMalloc(b, dev, uint64(n))
	src, dst := mustHost(b, dev, n), mustHost(b, dev, n)
	// Fault the device pages in with a copy, so device memory and the
	// plain copy's source were both last written by memmove, and warm both
	// paths before timing.
	if err := dev.CopyHtoD(p, src.Bytes(), s); err != nil {
		b.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	copy(dst.Bytes(), src.Bytes())
	var simT, copyT time.Duration
	for b.Loop() {
		t0 := time.Now()
		var err error
		if dir == "HtoD" {
			err = dev.CopyHtoD(p, src.Bytes(), s)
		} else {
			err = dev.CopyDtoH(dst.Bytes(), p, s)
		}
		if err == nil {
			err = s.Synchronize()
		}
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		copy(dst.Bytes(), src.Bytes())
		copyT += time.Since(t1)
		simT += t1.Sub(t0)
	}
	gbs := func(d time.Duration) float64 { return float64(n) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbs(simT), "sim-GB/s")
	b.ReportMetric(gbs(copyT), "copy-GB/s")
	b.ReportMetric(copyT.Seconds()/simT.Seconds(), "x-copy")
}
