package accbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/accelkit/accelkit/bench/report"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/hostpin"
)

func hostpinSuite() Suite {
	return Suite{
		Name: "hostpin", Title: "pinned host allocation: cached vs fresh driver HostAlloc",
		Run: func(env *Env) (Output, error) {
			var out Output
			a, err := hostpin.New(env.Dev, hostpin.Options{})
			if err != nil {
				return out, err
			}
			defer a.Close()
			for _, size := range []int{64 << 10, 1 << 20, 64 << 20} {
				env.Step("alloc+free %s", sizeName(size))
				fresh := 200
				if size >= 64<<20 || env.Quick {
					fresh = 20
				}
				t0 := time.Now()
				for range fresh {
					hb, err := env.Dev.HostAlloc(size)
					if err != nil {
						return out, err
					}
					if err := env.Dev.HostFree(hb); err != nil {
						return out, err
					}
				}
				freshNs := float64(time.Since(t0).Nanoseconds()) / float64(fresh)
				b, err := a.Alloc(size) // warm the class
				if err != nil {
					return out, err
				}
				if err := a.Free(b); err != nil {
					return out, err
				}
				n := 20000
				if env.Quick {
					n = 2000
				}
				t0 = time.Now()
				for range n {
					b, err := a.Alloc(size)
					if err != nil {
						return out, err
					}
					if err := a.Free(b); err != nil {
						return out, err
					}
				}
				cachedNs := float64(time.Since(t0).Nanoseconds()) / float64(n)
				out.Measurements = append(out.Measurements, Measurement{
					Case: "alloc+free " + sizeName(size), Unit: "ns/op", Ours: cachedNs, Base: freshNs, BaseName: "fresh HostAlloc",
					Goal: goalHostpinFresh,
				})
			}
			// Rounding waste over a log-uniform sweep 4 KiB..256 MiB: the size
			// handed out over the size asked for.
			rng := rand.New(rand.NewPCG(7, 7))
			var sum, worst float64
			const n = 100000
			for range n {
				req := int(4096 * math.Pow(65536, rng.Float64()))
				r := float64(a.RoundedSize(req)) / float64(req)
				sum += r
				worst = math.Max(worst, r)
			}
			out.Measurements = append(out.Measurements,
				Measurement{Case: "rounding waste, mean", Unit: "x", Ours: sum / n, Goal: goalWasteMean},
				Measurement{Case: "rounding waste, max", Unit: "x", Ours: worst, Goal: goalWasteMax})
			out.Notes = append(out.Notes, "rounding waste: the size handed out over the size asked for, over 100,000 requests log-uniform in 4 KiB..256 MiB.",
				"PyTorch's and CuPy's pinned allocators round to the next power of two (up to 2x).")
			return out, nil
		},
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// h2dSuite measures staged copies from pageable Go memory beside the
// driver's synchronous copy of the same memory and the best memmove of the
// same bytes into pinned memory, and registered copies beside the driver's
// copy from pinned memory, per size.
func h2dSuite() Suite {
	return Suite{
		Name: "h2d", Title: "host-to-device: staged through pinned chunks and registered in place, vs the driver's pageable and pinned copies and a memmove",
		// Named results: the deferred frees join their errors into err.
		Run: func(env *Env) (out Output, err error) {
			a, err := hostpin.New(env.Dev, hostpin.Options{})
			if err != nil {
				return out, err
			}
			defer a.Close()
			st, err := hostpin.NewStager(a, hostpin.StagerOptions{})
			if err != nil {
				return out, err
			}
			maxSize := 256 << 20
			if env.Quick {
				maxSize = 16 << 20
			}
			dst, err := env.Dev.Malloc(uint64(maxSize))
			if err != nil {
				return out, err
			}
			defer func() {
				if ferr := env.Dev.Free(dst); ferr != nil {
					err = errors.Join(err, fmt.Errorf("free the device buffer: %w", ferr))
				}
			}()
			src := make([]byte, maxSize)
			for i := range src {
				src[i] = byte(i * 7)
			}
			// A pinned buffer of the allocator: the driver's copy from it
			// is the pinned bandwidth, and the memmoves write into it.
			pinnedBuf, err := a.Alloc(maxSize)
			if err != nil {
				return out, err
			}
			defer func() {
				if ferr := a.Free(pinnedBuf); ferr != nil {
					err = errors.Join(err, fmt.Errorf("free the pinned buffer: %w", ferr))
				}
			}()
			pinned := pinnedBuf.Bytes()
			copy(pinned, src)
			s, err := env.Dev.NewStream()
			if err != nil {
				return out, err
			}
			defer func() {
				if derr := s.Destroy(); derr != nil {
					err = errors.Join(err, fmt.Errorf("destroy stream %d: %w", s.ID(), derr))
				}
			}()
			// A second buffer, registered (page-locked in place): the
			// Stager copies it with one DMA. Registration cost is timed here.
			regSrc := slices.Clone(src)
			var reg *hostpin.Registered
			t0 := time.Now()
			reg, err = st.Register(regSrc)
			regCost := time.Since(t0)
			switch {
			case errors.Is(err, driver.ErrNotSupported):
				out.Notes = append(out.Notes, "the device cannot register host memory: registered copies not measured")
				reg, err = nil, nil
			case err != nil:
				return out, err
			}
			if reg != nil {
				t0 = time.Now()
				if err := reg.Close(); err != nil {
					return out, err
				}
				regCost += time.Since(t0)
				if reg, err = st.Register(regSrc); err != nil {
					return out, err
				}
				defer func() {
					if uerr := reg.Close(); uerr != nil {
						err = errors.Join(err, uerr)
					}
				}()
				out.Measurements = append(out.Measurements, Measurement{
					Case: "Register + Unregister " + sizeName(maxSize), Unit: "us/MiB",
					Ours: float64(regCost.Nanoseconds()) / 1e3 / float64(maxSize>>20),
				})
			}
			var stagedLine, directLine, regLine, memmoveLine report.Line
			stagedLine.Label, directLine.Label, regLine.Label, memmoveLine.Label = "staged (mean)", "driver pageable (mean)", "registered (mean)", "best memmove (mean)"
			procs := runtime.GOMAXPROCS(0)
			for size := 4 << 10; size <= maxSize; size *= 4 {
				env.Step("copy %s", sizeName(size))
				reps := max(4, min(200, (64<<20)/size))
				if env.Quick {
					reps = max(2, reps/8)
				}
				sides := []h2dSide{
					{name: "staged", copy: func() error {
						if err := st.CopyHtoD(context.Background(), dst, src[:size], s); err != nil {
							return err
						}
						return s.Synchronize()
					}},
					{name: "driver pageable", copy: func() error { return env.Dev.CopyHtoDSync(dst, src[:size]) }},
					{name: "driver pinned", copy: func() error { return env.Dev.CopyHtoDSync(dst, pinned[:size]) }},
					{name: "memmove, 1 goroutine", copy: func() error { copy(pinned[:size], src[:size]); return nil }},
					{name: fmt.Sprintf("memmove, %d goroutines", procs), copy: func() error { parallelCopy(pinned[:size], src[:size], procs); return nil }},
				}
				if reg != nil {
					sides = append(sides, h2dSide{name: "registered", copy: func() error {
						return st.CopyHtoD(context.Background(), dst, regSrc[:size], s)
					}})
				}
				if err := runH2DSides(sides, size, reps); err != nil {
					return out, err
				}
				staged, direct, pinnedRate := sides[0].stat(), sides[1].stat(), sides[2].stat()
				best := sides[3]
				if sides[4].stat().Median > best.stat().Median {
					best = sides[4]
				}
				stagedRow := Measurement{
					Case: "H2D " + sizeName(size) + " (p50)", Unit: "GB/s", HigherBetter: true,
					Ours: staged.Median, Base: direct.Median, BaseName: "driver pageable",
				}
				if size >= 16<<20 && !env.Simulated {
					stagedRow.Goal = goalH2DStaged
				}
				out.Measurements = append(out.Measurements, stagedRow, Measurement{
					Case: "H2D " + sizeName(size) + " staged vs memmove (p50)", Unit: "GB/s", HigherBetter: true,
					Ours: staged.Median, Base: best.stat().Median, BaseName: "best " + best.name,
				})
				out.Notes = append(out.Notes, fmt.Sprintf("%s: staged mean %.2f GB/s, p95 %.2f; driver pageable mean %.2f, p95 %.2f; driver pinned p50 %.2f; memmove p50 %.2f on 1 goroutine, %.2f on %d (p95: the slowest 5%%)",
					sizeName(size), mean(sides[0].gbps), pct(sides[0].gbps, 95), mean(sides[1].gbps), pct(sides[1].gbps, 95),
					pinnedRate.Median, sides[3].stat().Median, sides[4].stat().Median, procs))
				stagedLine.Points = append(stagedLine.Points, [2]float64{float64(size), mean(sides[0].gbps)})
				directLine.Points = append(directLine.Points, [2]float64{float64(size), mean(sides[1].gbps)})
				memmoveLine.Points = append(memmoveLine.Points, [2]float64{float64(size), mean(best.gbps)})
				if reg != nil {
					r := sides[5]
					regRow := Measurement{
						Case: "H2D " + sizeName(size) + " registered (p50)", Unit: "GB/s", HigherBetter: true,
						Ours: r.stat().Median, Base: pinnedRate.Median, BaseName: "driver pinned",
					}
					if size >= 16<<20 && !env.Simulated {
						regRow.Goal = goalH2DRegistered
					}
					out.Measurements = append(out.Measurements, regRow)
					regLine.Points = append(regLine.Points, [2]float64{float64(size), mean(r.gbps)})
				}
			}
			lines := []report.Line{stagedLine, directLine, memmoveLine}
			if len(regLine.Points) > 0 {
				lines = append(lines, regLine)
			}
			out.Series = append(out.Series, report.Series{Name: "H2D bandwidth by size", XLabel: "copy size", YLabel: "GB/s", LogX: true,
				Lines: lines})
			out.Notes = append(out.Notes,
				"The sides alternate: each repetition runs every side once, the order rotating, and each figure is a median. "+
					"The best memmove (the faster of copy() on one goroutine and split over GOMAXPROCS, from the same pageable memory into pinned memory) is what a staged copy cannot beat: "+
					"it copies every byte so once, and a ratio to it is at most 1x.")
			if env.Simulated {
				out.Notes = append(out.Notes, "On the sim device every path is memcpy (a staged byte is copied twice: the Stager's memmove and the stream's): the ratio to the driver shows the staging pipeline's overhead, not a DMA speed-up. "+
					"The goals (staged >= 4x the driver's pageable copy, registered >= 0.9x the driver's pinned copy, from 16 MiB up) are a GPU's.")
			}
			return out, nil
		},
	}
}

// h2dSide is one way of moving a copy's bytes, and its rates.
type h2dSide struct {
	name string
	copy func() error
	gbps []float64
}

func (s *h2dSide) stat() report.Stat { return report.NewStat(s.gbps...) }

// runH2DSides runs every side reps times, one each per repetition in an
// order that rotates, so load that comes and goes falls on all alike, after
// one untimed run each (first touch of the pages, a warm chunk cache).
func runH2DSides(sides []h2dSide, size, reps int) error {
	for i := range sides {
		if err := sides[i].copy(); err != nil {
			return fmt.Errorf("%s: %w", sides[i].name, err)
		}
	}
	for r := range reps {
		for j := range sides {
			sd := &sides[(j+r)%len(sides)]
			t0 := time.Now()
			if err := sd.copy(); err != nil {
				return fmt.Errorf("%s: %w", sd.name, err)
			}
			sd.gbps = append(sd.gbps, gbps(size, time.Since(t0)))
		}
	}
	return nil
}

// parallelCopy copies src into dst (equal lengths) in parts pieces, one
// per goroutine, the caller copying the first: the parallel memmove.
func parallelCopy(dst, src []byte, parts int) {
	n := len(src)
	parts = max(1, min(parts, n/4096))
	per := (n + parts - 1) / parts
	var wg sync.WaitGroup
	for off := per; off < n; off += per {
		end := min(off+per, n)
		wg.Go(func() { copy(dst[off:end], src[off:end]) })
	}
	copy(dst[:min(per, n)], src[:min(per, n)])
	wg.Wait()
}

func gbps(n int, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e9 }

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func pct(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	// p95 of bandwidth: the slow tail is the low end.
	i := int(math.Round((100 - p) / 100 * float64(len(s)-1)))
	return s[i]
}

// unmeasuredH2DGoals lists the h2d goals of a run on the sim: they are a
// GPU's (a DMA that costs no CPU), so the sim's rows carry none, and the
// verdict says why.
func unmeasuredH2DGoals(res *report.Results) []report.Unmeasured {
	if !res.Simulated {
		return nil
	}
	var out []report.Unmeasured
	for _, s := range res.Suites {
		if s.Name != "h2d" {
			continue
		}
		for _, row := range s.Rows {
			var g Goal
			var against string
			switch {
			case row.BaseName == "driver pageable":
				g, against = goalH2DStaged, "driver pageable"
			case row.BaseName == "driver pinned":
				g, against = goalH2DRegistered, "driver pinned"
			default:
				continue
			}
			var size int
			if _, err := fmt.Sscanf(row.Case, "H2D %d MiB", &size); err != nil || size < 16 {
				continue
			}
			out = append(out, report.Unmeasured{Suite: "h2d", Case: row.Case, Goal: g.Text(row.Unit) + " " + against,
				Reason: "judged on a GPU only: on the sim every copy is a memcpy"})
		}
	}
	return out
}
