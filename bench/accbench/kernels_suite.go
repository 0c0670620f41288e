package accbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/accelkit/accelkit/bench/report"
	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/cuda"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/nvrtc"
	"github.com/accelkit/accelkit/progcache/filestream"
	"github.com/accelkit/accelkit/progcache/program"
)

// Cases of the kernels suite that a peer's figure or a goal joins.
const (
	kernelsColdCase   = "cold compile of the reference kernels"
	kernelsWarmCase   = "warm path: key, cache hit, load"
	kernelsLaunchCase = "launch latency, scale of 1 Ki floats"
	kernelsLoopCase   = "training-like step: devalloc activations, kernels, frees"
)

// The goals of issue 39: the warm path at most 0.5x cuda.core's; a
// launch at most 1.1x a raw cuLaunchKernel loop; the training-like loop
// at least 5x the same loop on cuMemAlloc/cuMemFree per tensor. They are
// about a GPU: on the sim the kernels are Go loops and Malloc is cheap,
// so they are judged on a GPU only (gpuGoals).
var (
	goalKernelsWarmVsCC = Goal{MinRatio: 2}
	goalKernelsLaunch   = Goal{MinRatio: 1 / 1.1}
	goalKernelsLoop     = Goal{MinRatio: 5}
)

// gpuGoals are the kernels goals the suite attaches only off the sim, and
// the baseline each is judged against (the warm path's is a peer's).
var gpuGoals = []struct {
	ours, against string
	goal          Goal
}{
	{kernelsWarmCase, "cuda.core", goalKernelsWarmVsCC},
	{kernelsLaunchCase, "raw cuLaunchKernel", goalKernelsLaunch},
	{kernelsLoopCase, "Malloc per tensor", goalKernelsLoop},
}

// unmeasuredGPUGoals lists the kernels goals a run that measured their
// rows could not judge: every one on the sim, and off it the launch goal
// where the backend has no raw launch loop to set beside ours.
func unmeasuredGPUGoals(res *report.Results) []report.Unmeasured {
	var out []report.Unmeasured
	for _, g := range gpuGoals {
		row := findRow(res, "kernels", g.ours)
		if row == nil || row.Skipped != "" || row.GoalMet != nil {
			continue
		}
		var reason string
		switch {
		case res.Simulated:
			reason = "judged on a GPU only: the sim's kernels are Go functions and its Malloc is cheap"
		case g.ours == kernelsLaunchCase && row.Base == nil:
			reason = "no raw cuLaunchKernel loop on this backend (cuda.RawLaunchLoop is CUDA's)"
		default:
			continue // the warm path off the sim: unmeasuredPeerGoals
		}
		out = append(out, report.Unmeasured{Suite: "kernels", Case: g.ours, Goal: g.goal.Text(row.Unit) + " " + g.against, Reason: reason})
	}
	return out
}

// rawLaunchLoop is the launch row's baseline: n launches in one C loop of
// cuLaunchKernel. cuda.RawLaunchLoop refuses a kernel of another backend,
// and that refusal says there is no baseline; tests stand a loop of their
// own in for it.
var rawLaunchLoop = cuda.RawLaunchLoop

// Shape of the training-like loop: per step, layers activations of
// activation floats each, scaled in place, each added to the last.
const (
	loopLayers     = 16
	loopActivation = 256 << 10 // floats: 1 MiB tensors
)

func kernelsSuite() Suite {
	return Suite{
		Name:  "kernels",
		Title: "the kernel path: NVRTC compile, cached load, launch, a training-like loop on devalloc",
		Run: func(env *Env) (Output, error) {
			var out Output
			ld, ok := driver.AsLauncher(env.Dev)
			if !ok {
				return out, skip(fmt.Sprintf("device %q cannot load programs (no driver.Launcher)", env.Dev.Name()))
			}
			if env.Simulated {
				out.Notes = append(out.Notes, "sim: the kernels are the sim's Go functions on PTX; launch and loop figures are the sim's, not a GPU's, "+
					"and the suite's goals (warm path at most 0.5x cuda.core's, launch at most 1.1x a raw cuLaunchKernel loop, "+
					"the loop at least 5x Malloc/Free per tensor) are judged on a GPU only.")
			}
			// kernel finds a reference kernel: in the program NVRTC
			// compiled through progcache/program, or without NVRTC in
			// drivertest.KernelPTX loaded as it is.
			var kernel func(name string) (driver.Kernel, error)
			if cc, err := nvrtc.Open(""); err != nil {
				why := "no NVRTC: " + err.Error()
				env.Step("compile rows skipped (%s); launch and loop on drivertest.KernelPTX", why)
				out.Measurements = append(out.Measurements,
					Measurement{Case: kernelsColdCase, Unit: "ms/op", Skipped: why},
					Measurement{Case: kernelsWarmCase, Unit: "us/op", Skipped: why})
				m, err := ld.LoadModule([]byte(drivertest.KernelPTX))
				if err != nil {
					return out, fmt.Errorf("load drivertest.KernelPTX: %w", err)
				}
				defer m.Unload()
				kernel = m.Kernel
				out.Notes = append(out.Notes, "without NVRTC the compile rows are skipped; launch and loop run the reference kernels precompiled (drivertest.KernelPTX, LoadModule).")
			} else {
				p, closeAll, err := compileRows(env, cc, &out)
				defer closeAll()
				if err != nil {
					return out, err
				}
				kernel = p.Kernel
			}

			k, err := kernel(drivertest.KernelScale)
			if err != nil {
				return out, err
			}
			env.Step("launch latency")
			rounds, per := map[bool]int{true: 5, false: 20}[env.Quick], map[bool]int{true: 400, false: 2000}[env.Quick]
			ours, raw, rawErr, err := launchLatency(env, k, rounds, per)
			if err != nil {
				return out, err
			}
			launch := Measurement{Case: kernelsLaunchCase, Unit: "us/launch", Ours: ours}
			if rawErr == nil {
				launch.Base, launch.BaseName = raw, "raw cuLaunchKernel"
				if !env.Simulated {
					launch.Goal = goalKernelsLaunch
				}
			}
			out.Measurements = append(out.Measurements, launch)

			env.Step("training-like loop")
			steps := map[bool]int{true: 5, false: 50}[env.Quick]
			ours, base, err := trainingLoop(env, kernel, steps)
			if err != nil {
				return out, err
			}
			loop := Measurement{Case: kernelsLoopCase, Unit: "us/step", Ours: ours, Base: base, BaseName: "Malloc per tensor"}
			if !env.Simulated {
				loop.Goal = goalKernelsLoop
			}
			out.Measurements = append(out.Measurements, loop)

			launchNote := fmt.Sprintf("launch latency: accelkit_scale of 1 Ki floats launched %d times on the default stream, then one synchronize, per launch; median of %d rounds, ", per, rounds)
			if rawErr == nil {
				launchNote += "each beside the same launches in one C loop of cuLaunchKernel (cuda.RawLaunchLoop: same kernel, arguments and stream), the two alternating in order."
			} else {
				launchNote += fmt.Sprintf("no raw baseline on the %s backend: %v.", env.Driver.Name(), rawErr)
			}
			out.Notes = append(out.Notes, launchNote,
				fmt.Sprintf("training-like step: %d activations of %d MiB from devalloc, each scaled and added into the last, all freed; baseline: the same step with device Malloc and Free per tensor, synchronizing before the frees as cudaFree does.", loopLayers, loopActivation*4>>20))
			return out, nil
		},
	}
}

// compileRows measures the cold compile and the warm path of
// progcache/program with cc and returns the reference program loaded
// through it; closeAll releases the program, its loader and its cache
// (also after an error).
func compileRows(env *Env, cc *nvrtc.Compiler, out *Output) (p *program.Program, closeAll func(), err error) {
	var closers []func() error
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	dir, err := os.MkdirTemp("", "accbench-kernels-")
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, func() error { return os.RemoveAll(dir) })
	cache, err := filestream.Open(filepath.Join(dir, "cache"), filestream.Options{})
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, cache.Close)
	l, err := program.New(program.Options{Device: env.Dev, Compiler: cc, Cache: cache})
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, l.Close)
	ctx := env.Ctx
	src := program.Source{Name: "kernels.cu", Code: []byte(drivertest.KernelSource)}

	env.Step("cold compile (NVRTC %s)", cc.VersionString())
	cold, raw, err := coldCompile(ctx, l, cc, src, map[bool]int{true: 2, false: 5}[env.Quick])
	if err != nil {
		return nil, closeAll, err
	}
	out.Measurements = append(out.Measurements, Measurement{
		Case: kernelsColdCase, Unit: "ms/op", Ours: cold,
		Base: raw, BaseName: "NVRTC alone",
	})

	env.Step("warm path")
	p, err = l.Load(ctx, src) // the miss that stores it, untimed
	if err != nil {
		return nil, closeAll, err
	}
	p.Close()
	n := map[bool]int{true: 200, false: 2000}[env.Quick]
	// Steady state: filestream trusts a file unchanged for 2 s
	// without its checksum, as a warm start finds it.
	time.Sleep(2100 * time.Millisecond)
	warm := make([]float64, 0, n)
	for range n {
		t0 := time.Now()
		p, err := l.Load(ctx, src)
		if err != nil {
			return nil, closeAll, err
		}
		warm = append(warm, float64(time.Since(t0).Nanoseconds())/1e3)
		if !p.FromCache() {
			p.Close()
			return nil, closeAll, fmt.Errorf("warm Load compiled")
		}
		p.Close()
	}
	out.Measurements = append(out.Measurements, Measurement{Case: kernelsWarmCase, Unit: "us/op", Ours: report.NewStat(warm...).Median})
	out.Notes = append(out.Notes,
		"cold compile: Load of a source not in the cache (key, NVRTC, store, load) beside NVRTC's compile of the same source alone; medians.",
		"warm path: Load of a cached program (toolchain-probed key, filestream hit, LoadModule) and Unload, median; on a GPU the goal is at most 0.5x cuda.core's warm path (Program.compile with its cache, or its make_program_cache_key and cache lookup, plus the ObjectCode load), measured with -peers.")

	p, err = l.Load(ctx, src)
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, p.Close)
	return p, closeAll, nil
}

// coldCompile times Loads that miss (a distinct comment makes each source
// new) and NVRTC compiling the same sources alone; medians in ms.
func coldCompile(ctx context.Context, l *program.Loader, cc *nvrtc.Compiler, src program.Source, n int) (ours, raw float64, err error) {
	o, r := make([]float64, 0, n), make([]float64, 0, n)
	for i := range n {
		s := src
		s.Code = append([]byte(fmt.Sprintf("// accbench cold compile %d %d\n", time.Now().UnixNano(), i)), src.Code...)
		t0 := time.Now()
		p, err := l.Load(ctx, s)
		if err != nil {
			return 0, 0, err
		}
		o = append(o, float64(time.Since(t0).Microseconds())/1e3)
		p.Close()
		_, in, err := l.Key(s)
		if err != nil {
			return 0, 0, err
		}
		t0 = time.Now()
		if _, err := cc.Compile(ctx, s.Code, nvrtc.Options{Name: s.Name, Arch: in.Options.Arch}); err != nil {
			return 0, 0, err
		}
		r = append(r, float64(time.Since(t0).Microseconds())/1e3)
	}
	return report.NewStat(o...).Median, report.NewStat(r...).Median, nil
}

// launchLatency times rounds of per launches of k (accelkit_scale of 1 Ki
// floats) on the default stream, each round synchronized, and beside each
// the same launches in one C loop of cuLaunchKernel (cuda.RawLaunchLoop),
// the two alternating which goes first; it returns the medians in
// us/launch. rawErr says why there is no raw baseline (not a CUDA kernel,
// a build without cgo), raw is 0 then.
func launchLatency(env *Env, k driver.Kernel, rounds, per int) (ours, raw float64, rawErr, err error) {
	const elems = 1 << 10
	x, err := env.Dev.Malloc(4 * elems)
	if err != nil {
		return 0, 0, nil, err
	}
	defer env.Dev.Free(x)
	if err := env.Dev.Memset(x, 0, 4*elems, nil); err != nil {
		return 0, 0, nil, err
	}
	s := env.Dev.DefaultStream()
	args := new(driver.Args)
	cfg := driver.LaunchConfig{Grid: driver.Dim3{X: elems / 256}, Block: driver.Dim3{X: 256}}
	// A program packs its arguments for each launch; the C loop packs
	// them once, as a C program would.
	timeOurs := func(m int) (time.Duration, error) {
		t0 := time.Now()
		for range m {
			args.Reset()
			args.Ptr(x).Float32(1).Int32(elems)
			if err := k.Launch(s, cfg, args); err != nil {
				return 0, err
			}
		}
		err := s.Synchronize()
		return time.Since(t0), err
	}
	rawArgs, err := driver.ArgsOf(x, float32(1), int32(elems))
	if err != nil {
		return 0, 0, nil, err
	}
	timeRaw := func(m int) (time.Duration, error) {
		t0 := time.Now()
		if err := rawLaunchLoop(k, s, cfg, rawArgs, m); err != nil {
			return 0, err
		}
		err := s.Synchronize()
		return time.Since(t0), err
	}
	// No launch: it checks the kernel and stream are CUDA's.
	rawErr = rawLaunchLoop(k, s, cfg, rawArgs, 0)
	if _, err := timeOurs(per / 10); err != nil { // warm up
		return 0, 0, nil, err
	}
	if rawErr == nil {
		if _, err := timeRaw(per / 10); err != nil {
			return 0, 0, nil, err
		}
	}
	o, r := make([]float64, 0, rounds), make([]float64, 0, rounds)
	perLaunch := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(per) }
	for i := range rounds {
		if rawErr == nil && i%2 == 1 {
			d, err := timeRaw(per)
			if err != nil {
				return 0, 0, nil, err
			}
			r = append(r, perLaunch(d))
		}
		d, err := timeOurs(per)
		if err != nil {
			return 0, 0, nil, err
		}
		o = append(o, perLaunch(d))
		if rawErr == nil && i%2 == 0 {
			d, err := timeRaw(per)
			if err != nil {
				return 0, 0, nil, err
			}
			r = append(r, perLaunch(d))
		}
	}
	ours = report.NewStat(o...).Median
	if rawErr == nil {
		raw = report.NewStat(r...).Median
	}
	return ours, raw, rawErr, nil
}

// trainingLoop runs steps of the training-like step on devalloc and on
// Malloc/Free per tensor, alternating, and returns the median us/step of
// each.
func trainingLoop(env *Env, kernel func(string) (driver.Kernel, error), steps int) (ours, base float64, err error) {
	scale, err := kernel(drivertest.KernelScale)
	if err != nil {
		return 0, 0, err
	}
	add, err := kernel(drivertest.KernelVectorAdd)
	if err != nil {
		return 0, 0, err
	}
	a, err := devalloc.New(env.Dev, devalloc.Config{})
	if err != nil {
		return 0, 0, err
	}
	defer a.Close()
	dev := env.Dev
	s := dev.DefaultStream()
	const bytes = 4 * loopActivation
	cfg := driver.LaunchConfig{Grid: driver.Dim3{X: loopActivation / 256}, Block: driver.Dim3{X: 256}}
	args := new(driver.Args)
	live := make([]driver.Ptr, loopLayers)
	// ordered says free is stream-ordered (devalloc's). Device Free is
	// not: the memory must be idle first, so the baseline synchronizes
	// before its frees, as cudaFree does implicitly.
	step := func(alloc func() (driver.Ptr, error), free func(driver.Ptr) error, ordered bool) error {
		for i := range live {
			p, err := alloc()
			if err != nil {
				return err
			}
			live[i] = p
			args.Reset()
			args.Ptr(p).Float32(0.5).Int32(loopActivation)
			if err := scale.Launch(s, cfg, args); err != nil {
				return err
			}
			if i > 0 {
				args.Reset()
				args.Ptr(live[i-1]).Ptr(p).Ptr(p).Int32(loopActivation)
				if err := add.Launch(s, cfg, args); err != nil {
					return err
				}
			}
		}
		if !ordered {
			if err := dev.Synchronize(); err != nil {
				return err
			}
		}
		for _, p := range live {
			if err := free(p); err != nil {
				return err
			}
		}
		return dev.Synchronize()
	}
	pooled := func() (driver.Ptr, error) { return a.Alloc(bytes, s) }
	perTensor := func() (driver.Ptr, error) { return dev.Malloc(bytes) }
	// One untimed step each: devalloc's pool fills, as after a model's first step.
	if err := step(pooled, a.Free, true); err != nil {
		return 0, 0, err
	}
	if err := step(perTensor, dev.Free, false); err != nil {
		return 0, 0, err
	}
	o, b := make([]float64, 0, steps), make([]float64, 0, steps)
	for range steps {
		t0 := time.Now()
		if err := step(pooled, a.Free, true); err != nil {
			return 0, 0, err
		}
		t1 := time.Now()
		if err := step(perTensor, dev.Free, false); err != nil {
			return 0, 0, err
		}
		o = append(o, float64(t1.Sub(t0).Nanoseconds())/1e3)
		b = append(b, float64(time.Since(t1).Nanoseconds())/1e3)
	}
	return report.NewStat(o...).Median, report.NewStat(b...).Median, nil
}
