package sim_test

import (
	"fmt"
	"os"
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
// per iteration so that both see the same load on a shared machine;
// better-than-copy-x is the sim's bandwidth over copy()'s (copy()'s time
// over the sim's), how many times better the sim is than copy().
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
	b.ReportMetric(copyT.Seconds()/simT.Seconds(), "better-than-copy-x")
}

// BenchmarkHostRegister times HostRegister+HostUnregister of Go memory of
// 1, 16 and 64 MiB (ns/op) and reports it per MiB (ns/MiB). On the sim a
// registration is bookkeeping (a pin and a table entry), so its cost is
// about constant and the figure per MiB falls with the size; on CUDA it is
// the page pinning, proportional to the size (driver/cuda's
// BenchmarkHostRegisterReal measures that).
func BenchmarkHostRegister(b *testing.B) {
	drv := open(b, "")
	dev, _ := device(b, drv, 0)
	hr := mustHRD(b, dev)
	for _, mib := range []int{1, 16, 64} {
		b.Run(fmt.Sprint(mib, "MiB"), func(b *testing.B) {
			mem := make([]byte, mib<<20)
			for b.Loop() {
				hb, err := hr.HostRegister(mem)
				if err != nil {
					b.Fatal(err)
				}
				if err := hr.HostUnregister(hb); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(mib), "ns/MiB")
		})
	}
}

// BenchmarkRegisteredCopy times an async HtoD copy of 64 MiB (enqueue,
// run, Synchronize) from registered Go memory against the same copy from
// a HostAlloc buffer, its baseline, interleaved per iteration so both see
// the same machine load; better-than-hostalloc-x is the registered copy's
// bandwidth over the HostAlloc one's. The sim treats both alike, so it
// should be about 1.
func BenchmarkRegisteredCopy(b *testing.B) {
	const n = 64 << 20
	drv := open(b, "")
	dev, _ := device(b, drv, 0)
	s, _ := dev.NewStream()
	p := mustMalloc(b, dev, n)
	pinned := mustHost(b, dev, n)
	mem := make([]byte, n)
	for i := range mem {
		mem[i] = byte(i)
	}
	copy(pinned.Bytes(), mem)
	reg := mustRegister(b, dev, mem)
	run := func(src []byte) time.Duration {
		t0 := time.Now()
		if err := dev.CopyHtoD(p, src, s); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	run(reg.Bytes()) // fault the device pages in and warm both paths
	run(pinned.Bytes())
	var regT, allocT time.Duration
	for b.Loop() {
		regT += run(reg.Bytes())
		allocT += run(pinned.Bytes())
	}
	gbs := func(d time.Duration) float64 { return float64(n) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbs(regT), "registered-GB/s")
	b.ReportMetric(gbs(allocT), "hostalloc-GB/s")
	b.ReportMetric(allocT.Seconds()/regT.Seconds(), "better-than-hostalloc-x")
	if err := mustHRD(b, dev).HostUnregister(reg); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAddressReserveFree times AddressReserve of one granule, a
// SetAccess-style lookup (MemMap of it) and AddressFree with 1,000, 10,000
// and 100,000 other reservations live: the syscalls plus the table, whose
// cost was linear in the live reservations up to 4923b36 (see
// BenchmarkTable for the table alone beside its old form). The
// granularity is the OS page, so that the kernel merges the reservations'
// mappings and 100,000 of them stay under vm.max_map_count.
func BenchmarkAddressReserveFree(b *testing.B) {
	for _, live := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprint("live=", live), func(b *testing.B) {
			drv := open(b, fmt.Sprintf("granularity=%d", os.Getpagesize()))
			_, d := device(b, drv, 0)
			g := d.Granularity()
			for range live {
				if _, err := d.AddressReserve(g, 0); err != nil {
					b.Fatal(err)
				}
			}
			h, err := d.MemCreate(g)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				p, err := d.AddressReserve(g, 0)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.MemMap(p, g, 0, h); err != nil {
					b.Fatal(err)
				}
				if err := d.MemUnmap(p, g); err != nil {
					b.Fatal(err)
				}
				if err := d.AddressFree(p, g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
