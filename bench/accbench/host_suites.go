package accbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

// h2dSuite measures staged copies from pageable Go memory against the
// driver's synchronous copy of the same memory, per size.
func h2dSuite() Suite {
	return Suite{
		Name: "h2d", Title: "host-to-device: staged through pinned chunks and registered in place, vs the driver's pageable copy",
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
			var stagedLine, directLine, regLine report.Line
			stagedLine.Label, directLine.Label, regLine.Label = "staged (mean)", "driver pageable (mean)", "registered (mean)"
			for size := 4 << 10; size <= maxSize; size *= 4 {
				env.Step("copy %s", sizeName(size))
				reps := max(4, min(200, (64<<20)/size))
				if env.Quick {
					reps = max(2, reps/8)
				}
				staged, direct, registered := make([]float64, reps), make([]float64, reps), make([]float64, 0, reps)
				for i := range reps {
					if reg != nil {
						t0 := time.Now()
						if err := st.CopyHtoD(context.Background(), dst, regSrc[:size], s); err != nil {
							return out, err
						}
						registered = append(registered, gbps(size, time.Since(t0)))
					}
					t0 := time.Now()
					if err := st.CopyHtoD(context.Background(), dst, src[:size], s); err != nil {
						return out, err
					}
					if err := s.Synchronize(); err != nil {
						return out, err
					}
					staged[i] = gbps(size, time.Since(t0))
					t0 = time.Now()
					if err := env.Dev.CopyHtoDSync(dst, src[:size]); err != nil {
						return out, err
					}
					direct[i] = gbps(size, time.Since(t0))
				}
				ss, ds := report.NewStat(staged...), report.NewStat(direct...)
				sm, dm := mean(staged), mean(direct)
				out.Measurements = append(out.Measurements, Measurement{
					Case: "H2D " + sizeName(size) + " (p50)", Unit: "GB/s", HigherBetter: true,
					Ours: ss.Median, Base: ds.Median, BaseName: "driver pageable",
				})
				out.Notes = append(out.Notes, fmt.Sprintf("%s: staged mean %.2f GB/s, p95 %.2f; driver pageable mean %.2f, p95 %.2f (p95: the slowest 5%%)",
					sizeName(size), sm, pct(staged, 95), dm, pct(direct, 95)))
				stagedLine.Points = append(stagedLine.Points, [2]float64{float64(size), sm})
				directLine.Points = append(directLine.Points, [2]float64{float64(size), dm})
				if len(registered) > 0 {
					out.Measurements = append(out.Measurements, Measurement{
						Case: "H2D " + sizeName(size) + " registered (p50)", Unit: "GB/s", HigherBetter: true,
						Ours: report.NewStat(registered...).Median, Base: ss.Median, BaseName: "staged",
					})
					regLine.Points = append(regLine.Points, [2]float64{float64(size), mean(registered)})
				}
			}
			lines := []report.Line{stagedLine, directLine}
			if len(regLine.Points) > 0 {
				lines = append(lines, regLine)
			}
			out.Series = append(out.Series, report.Series{Name: "H2D bandwidth by size", XLabel: "copy size", YLabel: "GB/s", LogX: true,
				Lines: lines})
			if env.Simulated {
				out.Notes = append(out.Notes, "On the sim device both paths are memcpy: the ratio shows the staging pipeline's overhead, not a DMA speed-up.")
			}
			return out, nil
		},
	}
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
