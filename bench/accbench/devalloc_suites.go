package accbench

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/accelkit/accelkit/bench/trace"
	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/driver"
)

// Churn workload parameters: sizes log-uniform in [churnMin, churnMax],
// each goroutine keeping a window of churnLive allocations and replacing a
// random one per operation. Fixed so figures compare across runs.
const (
	churnMin  = 512
	churnMax  = 4 << 20
	churnLive = 64
	churnSeed = 42
)

func logUniform(rng *rand.Rand, lo, hi float64) uint64 {
	return uint64(lo * math.Pow(hi/lo, rng.Float64()))
}

// churn runs ops alloc+free pairs per goroutine on its own stream and
// returns the mean time per pair.
func churn(a devalloc.Resource, streams []driver.Stream, ops int) (time.Duration, error) {
	goroutines := len(streams)
	// The sequence is drawn before the clock starts: math.Pow alone costs
	// about as much as a cache hit.
	type op struct {
		size   uint64
		victim int
	}
	plan := make([][]op, goroutines)
	for g := range plan {
		rng := rand.New(rand.NewPCG(churnSeed, uint64(g)))
		plan[g] = make([]op, ops)
		for i := range plan[g] {
			plan[g][i] = op{victim: rng.IntN(churnLive), size: logUniform(rng, churnMin, churnMax)}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, goroutines)
	start := time.Now()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			live := make([]driver.Ptr, 0, churnLive)
			defer func() {
				for _, p := range live {
					if err := a.Free(p); err != nil && errs[g] == nil {
						errs[g] = err
					}
				}
			}()
			for _, op := range plan[g] {
				if len(live) == churnLive {
					i := op.victim % len(live)
					if err := a.Free(live[i]); err != nil {
						errs[g] = err
						return
					}
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
				}
				p, err := a.Alloc(op.size, streams[g])
				if err != nil {
					errs[g] = err
					return
				}
				live = append(live, p)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	return el / time.Duration(goroutines*ops), errors.Join(errs...)
}

func newStreams(env *Env, n int) ([]driver.Stream, error) {
	var out []driver.Stream
	for range n {
		s, err := env.Dev.NewStream()
		if err != nil {
			_ = destroyStreams(out) // best effort: err is what the caller needs
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// destroyStreams destroys ss and returns the failures, joined.
func destroyStreams(ss []driver.Stream) error {
	var errs []error
	for _, s := range ss {
		if err := s.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("destroy stream %d: %w", s.ID(), err))
		}
	}
	return errors.Join(errs...)
}

// newAlloc opens the resource conf names: the caching allocator, or the
// passthrough baseline for backend:passthrough.
func newAlloc(env *Env, conf string) (devalloc.Resource, error) {
	cfg, err := devalloc.ParseConfig(conf)
	if err != nil {
		return nil, err
	}
	return devalloc.Open(env.Dev, cfg)
}

func devallocSuite() Suite {
	return Suite{
		Name: "devalloc", Title: "caching device allocator vs passthrough (cuMemAlloc/sim malloc per request)",
		Run: func(env *Env) (Output, error) {
			var out Output
			ops := 20000
			if env.Quick {
				ops = 2000
			}
			for _, g := range []int{1, 8} {
				per := map[string]time.Duration{}
				for _, conf := range []string{"backend:native", "backend:passthrough"} {
					env.Step("churn %d goroutine(s), %s", g, conf)
					a, err := newAlloc(env, conf)
					if err != nil {
						return out, err
					}
					n := ops
					if conf == "backend:passthrough" {
						n = max(ops/10, 200) // each op is a driver call; fewer keep the suite short
					}
					// An untimed pass first, on the same streams (free
					// sets are per stream): the figure is the steady
					// state, not the one-time cost of creating segments
					// (on sim each is host memory faulted in, ~0.2 ms per
					// MiB, which would dominate 20k operations).
					streams, err := newStreams(env, g)
					var d time.Duration
					if err == nil {
						_, err = churn(a, streams, n)
					}
					if err == nil {
						d, err = churn(a, streams, n)
					}
					err = errors.Join(err, destroyStreams(streams))
					if err == nil {
						err = a.EmptyCache()
					}
					a.Close()
					if err != nil {
						return out, fmt.Errorf("churn %s: %w", conf, err)
					}
					per[conf] = d
				}
				out.Measurements = append(out.Measurements, Measurement{
					Case: fmt.Sprintf("churn alloc+free, %d goroutine(s)", g), Unit: "ns/op",
					Ours: float64(per["backend:native"].Nanoseconds()), Base: float64(per["backend:passthrough"].Nanoseconds()),
					BaseName: "passthrough", Goal: goalChurn,
				})
			}
			// Hit path: the pool state bench/peers measures PyTorch in.
			a, err := devalloc.New(env.Dev, devalloc.Config{})
			if err != nil {
				return out, err
			}
			iters := 200000
			if env.Quick {
				iters = 20000
			}
			env.Step("hit path, %d cached blocks on %d streams", poolBlocks, hitStreams)
			ns, err := hitPath(env, a, iters)
			if err != nil {
				a.Close()
				return out, err
			}
			out.Measurements = append(out.Measurements, Measurement{Case: hitPathCase, Unit: "ns/pair", Ours: ns})
			for _, size := range []uint64{512, 64 << 10, 2 << 20, 20 << 20} {
				ns, err := warmPair(env, a, size, iters)
				if err != nil {
					a.Close()
					return out, err
				}
				out.Measurements = append(out.Measurements, Measurement{Case: warmCase(size), Unit: "ns/pair", Ours: ns})
			}
			if err := a.Close(); err != nil {
				return out, err
			}
			out.Notes = append(out.Notes, fmt.Sprintf("churn: sizes log-uniform %d B..%d MiB, %d live per goroutine, seed %d, one stream per goroutine; each backend runs the workload once untimed, then timed (steady state)", churnMin, churnMax>>20, churnLive, churnSeed))
			// Fragmentation on the training trace, plain vs expandable.
			events := trace.Training(trainingParams(env))
			for _, conf := range []string{"", "expandable_segments:true"} {
				env.Step("training trace, %q", conf)
				r, err := replayThrough(env, events, conf)
				if err != nil {
					return out, err
				}
				name := "plain"
				if conf != "" {
					name = "expandable"
				}
				out.Measurements = append(out.Measurements, Measurement{
					Case: fragCase("training", name), Unit: "x",
					Ours: r.fragmentation(), Goal: fragGoal(name),
				})
			}
			out.Notes = append(out.Notes, fragNote)
			return out, nil
		},
	}
}

var hitPathCase = fmt.Sprintf("hit path, %d blocks, %d streams", poolBlocks, hitStreams)

// fragCase names the fragmentation row of a trace through a mode, the
// mode before the figure so that a cut label still tells rows apart.
func fragCase(trace, mode string) string { return trace + " " + mode + ": fragmentation" }

const fragNote = "fragmentation: peak reserved / peak allocated (1.00: nothing reserved beyond the live peak)."

func warmCase(size uint64) string { return "warm alloc+free " + sizeName(int(size)) }

func fragGoal(mode string) Goal {
	if mode == "plain" {
		return goalFragPlain
	}
	return goalFragExpandable
}

// policyName names the baseline of release-before-growing: devalloc with
// PyTorch's caching policy, on the same trace in the same run.
const policyName = "PyTorch policy"

const policyNote = "PyTorch policy: devalloc with release_before_grow:false, PyTorch's caching policy, replaying the same trace in the same run."

// shapesGoal is release-before-growing's goal on the shape-changing
// trace (issue 27, goalShapesPlain). Without -peers the baseline is
// PyTorch's policy replayed by devalloc here; with -peers it is PyTorch
// itself (goalShapesVsTorch).
func shapesGoal(mode string) Goal {
	if mode == "plain" {
		return goalShapesPlain
	}
	return goalShapesExpandable
}

func trainingParams(env *Env) trace.TrainingParams {
	p := trace.DefaultTraining
	if env.Quick {
		p.Steps = 3
	}
	return p
}

func inferenceParams(env *Env) trace.InferenceParams {
	p := trace.DefaultInference
	if env.Quick {
		p.Requests = 12
	}
	return p
}

// devallocAdapter lets a trace replay through devalloc on a driver stream
// per trace stream id, so that each keeps its own cache as in the traced
// program. A trace may name many thousands of streams (one per request or
// thread); a driver stream is destroyed once the trace has nothing live on
// it and devalloc holds nothing for it (HoldsStream), which nothing in the
// replay can tell apart from keeping it. So the driver streams alive at
// once follow the streams holding memory, not the ids in the trace.
type devallocAdapter struct {
	env     *Env
	a       devalloc.Resource
	streams map[uint64]*replayStream // trace stream id -> driver stream
	idle    []uint64                 // trace streams reported idle, to retire at the next sweep
	sweepAt int                      // sweep when this many driver streams exist
	created int                      // driver streams created
	peak    int                      // most driver streams alive at once
}

type replayStream struct {
	s      driver.Stream
	idle   bool // nothing live on it in the replay
	listed bool // on devallocAdapter.idle
}

// minSweep is the fewest driver streams at which the adapter looks for
// ones to retire: a trace with a few streams never pays for it.
const minSweep = 64

func newDevallocAdapter(env *Env, a devalloc.Resource) *devallocAdapter {
	return &devallocAdapter{env: env, a: a, streams: map[uint64]*replayStream{}, sweepAt: minSweep}
}

func (d *devallocAdapter) stream(id uint64) (driver.Stream, error) {
	if id == 0 {
		return d.env.Dev.DefaultStream(), nil
	}
	if rs := d.streams[id]; rs != nil {
		rs.idle = false
		return rs.s, nil
	}
	if len(d.streams) >= d.sweepAt {
		d.sweep()
	}
	s, err := d.env.Dev.NewStream()
	if err != nil {
		return nil, err
	}
	d.streams[id] = &replayStream{s: s}
	d.created++
	d.peak = max(d.peak, len(d.streams))
	return s, nil
}

// sweep destroys the driver streams of idle trace streams that devalloc
// holds nothing for. It runs when the driver streams have doubled since
// the last sweep, so its cost is amortised over the streams created.
func (d *devallocAdapter) sweep() {
	kept := d.idle[:0]
	for _, id := range d.idle {
		rs := d.streams[id]
		switch {
		case rs == nil || !rs.idle: // busy again: listed again when idle
			if rs != nil {
				rs.listed = false
			}
		case d.a.HoldsStream(rs.s): // its cache is still there
			kept = append(kept, id)
		default:
			_ = rs.s.Destroy() // nothing was queued on it
			delete(d.streams, id)
		}
	}
	clear(d.idle[len(kept):])
	d.idle = kept
	d.sweepAt = max(minSweep, 2*len(d.streams))
}

// StreamIdle is told by trace.Replay that nothing is live on stream id.
func (d *devallocAdapter) StreamIdle(id uint64) {
	if rs := d.streams[id]; rs != nil {
		rs.idle = true
		if !rs.listed {
			rs.listed = true
			d.idle = append(d.idle, id)
		}
	}
}

func (d *devallocAdapter) Alloc(size, stream uint64) (uint64, error) {
	s, err := d.stream(stream)
	if err != nil {
		return 0, err
	}
	p, err := d.a.Alloc(size, s)
	return uint64(p), err
}

func (d *devallocAdapter) Free(p uint64) error { return d.a.Free(driver.Ptr(p)) }

func (d *devallocAdapter) close() {
	for _, rs := range d.streams {
		_ = rs.s.Destroy() // nothing was queued on it
	}
	clear(d.streams)
}

type replayResult struct {
	trace.Result
	stats devalloc.Stats
	// Driver streams the replay created, and the most alive at once.
	streamsCreated, streamsPeak int
}

func (r replayResult) fragmentation() float64 {
	alloc := r.stats.AllocatedBytes[0].Peak
	if alloc == 0 {
		return 0
	}
	return float64(r.stats.ReservedBytes[0].Peak) / float64(alloc)
}

func replayThrough(env *Env, events []trace.Event, conf string) (replayResult, error) {
	a, err := newAlloc(env, conf)
	if err != nil {
		return replayResult{}, err
	}
	defer a.Close()
	ad := newDevallocAdapter(env, a)
	defer ad.close()
	res, err := trace.Replay(events, ad)
	if err != nil {
		return replayResult{}, err
	}
	st := a.Stats()
	if err := a.EmptyCache(); err != nil {
		return replayResult{}, err
	}
	return replayResult{Result: res, stats: st, streamsCreated: ad.created, streamsPeak: ad.peak}, nil
}

// streamsParams is the built-in "streams" trace: 64 requests on streams
// of their own, 30 MiB each, freed before the next stream allocates.
var streamsParams = trace.StreamsParams{Streams: 64, Size: 30 << 20}

// replayModes are the configurations a trace replays through: the two
// caching modes, each beside the same mode under PyTorch's policy (the
// cache kept until an allocation fails), and the uncached baseline.
var replayModes = []struct{ name, conf, policy string }{
	{"plain", "", "release_before_grow:false"},
	{"expandable", "expandable_segments:true", "expandable_segments:true,release_before_grow:false"},
	{"passthrough", "backend:passthrough", ""},
}

// replayRows are the figures of one trace through one caching mode, r
// with release-before-growing and rp under PyTorch's policy: peak reserved
// over peak allocated, the driver calls each made (and per training step
// the extra ones release-before-growing costs), retries and OOMs.
func replayRows(name, mode string, steps int, r, rp replayResult) []Measurement {
	frag := Measurement{
		Case: fragCase(name, mode), Unit: "x",
		Ours: r.fragmentation(), Base: rp.fragmentation(), BaseName: policyName,
	}
	if name == "shapes" {
		frag.Goal = shapesGoal(mode)
	}
	rows := []Measurement{frag,
		{Case: fmt.Sprintf("%s %s: driver allocs", name, mode), Unit: "count",
			Ours: float64(r.stats.NumDeviceAlloc), Base: float64(rp.stats.NumDeviceAlloc), BaseName: policyName},
		{Case: fmt.Sprintf("%s %s: driver frees", name, mode), Unit: "count",
			Ours: float64(r.stats.NumDeviceFree), Base: float64(rp.stats.NumDeviceFree), BaseName: policyName},
	}
	if steps > 0 {
		per := func(ours, base int64) float64 { return float64(ours-base) / float64(steps) }
		rows = append(rows,
			Measurement{Case: fmt.Sprintf("%s %s: extra allocs", name, mode), Unit: "per step",
				Ours: per(r.stats.NumDeviceAlloc, rp.stats.NumDeviceAlloc)},
			Measurement{Case: fmt.Sprintf("%s %s: extra frees", name, mode), Unit: "per step",
				Ours: per(r.stats.NumDeviceFree, rp.stats.NumDeviceFree)})
	}
	return append(rows,
		Measurement{Case: fmt.Sprintf("%s %s: alloc retries", name, mode), Unit: "count", Ours: float64(r.stats.NumAllocRetries)},
		Measurement{Case: fmt.Sprintf("%s %s: OOMs", name, mode), Unit: "count", Ours: float64(r.stats.NumOOMs)})
}

func replaySuite() Suite {
	return Suite{
		Name: "replay", Title: "allocation traces (RMM logging CSV) through devalloc plain, expandable and passthrough",
		Run: func(env *Env) (Output, error) {
			var out Output
			type replayTrace struct {
				name   string
				events []trace.Event
				steps  int // training steps; 0 when the trace has none
			}
			traces := []replayTrace{
				{"training", trace.Training(trainingParams(env)), trainingParams(env).Steps},
				{"inference", trace.Inference(inferenceParams(env)), 0},
				// In full even with -quick: its warmup needs every step, and
				// it replays in milliseconds.
				{"shapes", trace.Training(trace.DefaultShapes), trace.DefaultShapes.Steps},
				// A stream per request, each using its memory once: what
				// a per-stream cache keeps when nothing releases it.
				{"streams", trace.ManyStreams(streamsParams), 0},
			}
			if env.Trace != "" {
				traces = append(traces, replayTrace{traceName(env.Trace), env.traceEvents, 0})
			}
			for _, tr := range traces {
				if err := writeTrace(env, tr.name+".csv", tr.events); err != nil {
					return out, err
				}
				sum := trace.Summarize(tr.events)
				out.Notes = append(out.Notes, fmt.Sprintf("%s: %d events on %d stream(s), %d \"allocate failure\" line(s) (the traced allocator's own refusals, replayed as nothing), peak live %.2f GiB; written to traces/%s.csv for bench/peers",
					tr.name, sum.Events, sum.Streams, sum.Failures, float64(sum.PeakLive)/(1<<30), tr.name))
				times := map[string]float64{}
				var unknown, null int
				for _, mode := range replayModes {
					env.Step("%s through %s", tr.name, mode.name)
					r, err := replayThrough(env, tr.events, mode.conf)
					if err != nil {
						return out, fmt.Errorf("%s %s: %w", tr.name, mode.name, err)
					}
					times[mode.name] = float64(r.Elapsed.Microseconds()) / 1000
					unknown, null = r.UnknownFrees, r.NullAllocs
					if mode.policy != "" {
						env.Step("%s through %s, %s", tr.name, mode.name, policyName)
						rp, err := replayThrough(env, tr.events, mode.policy)
						if err != nil {
							return out, fmt.Errorf("%s %s with %s: %w", tr.name, mode.name, mode.policy, err)
						}
						out.Measurements = append(out.Measurements, replayRows(tr.name, mode.name, tr.steps, r, rp)...)
					}
					out.Measurements = append(out.Measurements, Measurement{
						Case: fmt.Sprintf("%s %s: failed allocs", tr.name, mode.name), Unit: "count", Ours: float64(r.Failed)})
					if r.FirstErr != nil {
						out.Notes = append(out.Notes, fmt.Sprintf("%s through %s: %d of %d allocations failed (their %d frees skipped); the first: %s",
							tr.name, mode.name, r.Failed, r.Failed+r.Allocs, r.SkippedFrees, clip(r.FirstErr.Error(), 300)))
					}
					if r.streamsCreated > minSweep {
						out.Notes = append(out.Notes, fmt.Sprintf("%s through %s: %d driver streams created for the trace's streams, at most %d alive at once (a stream goes once nothing is live on it and devalloc holds nothing for it)",
							tr.name, mode.name, r.streamsCreated, r.streamsPeak))
					}
				}
				out.Measurements = append(out.Measurements, Measurement{
					Case: fmt.Sprintf("%s: frees of unknown pointers", tr.name), Unit: "count", Ours: float64(unknown)})
				if null > 0 {
					out.Notes = append(out.Notes, fmt.Sprintf("%s: %d allocation(s) of the null pointer (zero bytes), replayed as nothing", tr.name, null))
				}
				for _, mode := range []string{"plain", "expandable"} {
					out.Measurements = append(out.Measurements, Measurement{
						Case: fmt.Sprintf("%s %s: replay time", tr.name, mode), Unit: "ms",
						Ours: times[mode], Base: times["passthrough"], BaseName: "passthrough",
					})
				}
			}
			out.Notes = append(out.Notes, fragNote, policyNote,
				"driver allocs and frees: calls to the driver's allocate and free. Extra allocs and frees: per training step, release-before-growing's beyond those of PyTorch's policy. Frees of unknown pointers: frees of pointers the trace never allocated (a log started mid-run).")
			return out, nil
		},
	}
}

// traceName names a -trace file in the report and in traces/: its base
// name without .csv, kept apart from the built-in traces' names.
func traceName(path string) string {
	name := strings.TrimSuffix(filepath.Base(path), ".csv")
	if name == "training" || name == "inference" || name == "shapes" || name == "streams" {
		name = "trace-" + name
	}
	return name
}

// loadTrace reads and checks a -trace file. Errors name the file, the line
// when one is at fault, and what is valid.
func loadTrace(path string) ([]trace.Event, error) {
	want := "want an RMM logging_resource_adaptor CSV with the header " + trace.Header
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("-trace %s: %w (%s)", path, err, want)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("-trace %s: not a regular file (%s)", path, want)
	}
	events, err := trace.Read(f)
	if err == nil {
		err = trace.Check(events)
	}
	if le := (*trace.LineError)(nil); errors.As(err, &le) {
		return nil, fmt.Errorf("-trace %s:%d: %s", path, le.Line, le.Msg)
	}
	if err != nil {
		return nil, fmt.Errorf("-trace %s: %w", path, err)
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("-trace %s: a header and no events, want allocate and free lines after it", path)
	}
	return events, nil
}

// writeTrace writes events to traces/name in the output directory, for
// bench/peers.
func writeTrace(env *Env, name string, events []trace.Event) error {
	if err := env.out.mkdir("traces"); err != nil {
		return err
	}
	return env.out.writeFiles(outFile{"traces/" + name, 0o644, func(w io.Writer) error { return trace.Write(w, events) }})
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// churnInvariantsSuite is the allocator storm that fails the program when
// an invariant breaks: no leak (in-use returns to 0), no spurious OOM (the
// workload fits the device many times over), EmptyCache releases at least
// 95% of reserved, and the cache is hit.
func churnInvariantsSuite() Suite {
	return Suite{
		Name: "churn-invariants", Title: "allocator storm with invariant checks (non-zero exit on failure)", Invariant: true,
		Run: func(env *Env) (Output, error) {
			var out Output
			ops := 5000
			if env.Quick {
				ops = 800
			}
			for _, c := range []struct{ conf, label string }{
				{"", "default"},
				{"expandable_segments:true", "expandable"},
				{"cross_stream_reuse:true,garbage_collection_threshold:0.8", "cross-stream, GC 0.8"},
			} {
				conf := c.conf
				env.Step("storm %q", conf)
				a, err := newAlloc(env, conf)
				if err != nil {
					return out, err
				}
				streams, err := newStreams(env, 8)
				if err == nil {
					_, err = churn(a, streams, ops)
					err = errors.Join(err, destroyStreams(streams))
				}
				if err != nil {
					a.Close()
					if devalloc.IsOOM(err) {
						return out, fmt.Errorf("config %q: spurious OOM on a workload far below capacity: %w", conf, err)
					}
					return out, fmt.Errorf("config %q: %w", conf, err)
				}
				st := a.Stats()
				inUse := st.AllocatedBytes[0].Current
				reserved := st.ReservedBytes[0].Current
				hits := st.NumAllocs - st.NumDeviceAlloc
				if err := a.EmptyCache(); err != nil {
					a.Close()
					return out, err
				}
				after := a.Stats().ReservedBytes[0].Current
				a.Close()
				switch {
				case inUse != 0:
					return out, fmt.Errorf("config %q: leak: %d bytes still allocated after every block was freed", conf, inUse)
				case reserved > 0 && float64(reserved-after) < 0.95*float64(reserved):
					return out, fmt.Errorf("config %q: EmptyCache released %d of %d reserved bytes (< 95%%)", conf, reserved-after, reserved)
				case hits <= 0:
					return out, fmt.Errorf("config %q: no cache hits in %d allocations", conf, st.NumAllocs)
				}
				out.Measurements = append(out.Measurements, Measurement{
					Case: "cache hit rate, " + c.label, Unit: "%", HigherBetter: true,
					Ours: 100 * float64(hits) / float64(st.NumAllocs),
				})
			}
			out.Notes = append(out.Notes, "configurations: default (empty), expandable (expandable_segments:true), cross-stream, GC 0.8 (cross_stream_reuse:true,garbage_collection_threshold:0.8).")
			return out, nil
		},
	}
}
