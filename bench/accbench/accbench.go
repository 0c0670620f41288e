// Package accbench is the accbench program as a library, so that
// bench/cmd/accbench and bench/sqlitepeer/cmd/accbench (accbench with a
// SQLite backend added to the progcache suite) share one implementation.
package accbench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/accelkit/accelkit/bench/report"
	"github.com/accelkit/accelkit/bench/trace"
	"github.com/accelkit/accelkit/driver"
)

// Env is what a suite runs with.
type Env struct {
	Ctx       context.Context
	Driver    driver.Driver
	Dev       driver.Device
	Simulated bool
	Quick     bool   // seconds, not minutes: CI smoke runs
	Out       string // output directory (traces are written here for peers)
	Trace     string // -trace FILE for the replay suite
	Extra     Extra
	progress  func(step string)

	out         *outDir       // Out, where suites write their files
	traceEvents []trace.Event // Trace, read and checked before any suite runs
}

// Step reports progress on stderr: suite, step and elapsed time.
func (e *Env) Step(format string, args ...any) {
	if e.progress != nil {
		e.progress(fmt.Sprintf(format, args...))
	}
}

// Measurement is one figure of one repetition: ours beside a baseline
// measured in the same run.
type Measurement struct {
	Case         string
	Unit         string
	Ours         float64
	Base         float64 // 0: no baseline
	BaseName     string
	HigherBetter bool
	// Goal is judged on the aggregated row; the zero Goal is none.
	Goal Goal
	// Anchor is the baseline's figure from another machine, shown beside
	// ours for scale, never a ratio or a verdict; a goal against that
	// baseline is judged only where it is measured in the run (-peers).
	Anchor *report.Anchor
	// Skipped says why this case cannot run here while the rest of the
	// suite can ("no NVRTC: ..."); the measurement has no figures then,
	// and the table names the case with the reason.
	Skipped string
}

// Output is one repetition of a suite.
type Output struct {
	Measurements []Measurement
	Series       []report.Series
	Notes        []string
}

// Suite is one named benchmark suite.
type Suite struct {
	Name  string
	Title string
	// Run measures one repetition. An error made by skip says the suite
	// cannot run on this machine: the report says why, and that is not a
	// failure.
	Run func(env *Env) (Output, error)
	// Invariant suites must pass: they fail the program (non-zero exit)
	// when Run errors.
	Invariant bool
}

// skipError is the error of a suite that cannot run on this machine,
// such as one that needs a program that is not installed.
type skipError struct{ reason string }

func (e *skipError) Error() string { return "skipped: " + e.reason }

// skip returns the error with which a suite's Run says it cannot run
// here; reason says why and what would make it run.
func skip(reason string) error { return &skipError{reason} }

// Extra carries what a variant main adds, such as more progcache backends.
type Extra struct {
	// ProgcacheBackends adds named caches to the progcache suite; open
	// creates one in dir.
	ProgcacheBackends []NamedCache

	loadavg string // the load average's file; "": /proc/loadavg on Linux
}

// Main runs accbench with args (without the program name) and returns the
// exit code.
func Main(args []string, stdout, stderr io.Writer, extra Extra) int {
	return run(args, stdout, stderr, extra, allSuites())
}

const usage = `usage: accbench [-suite a,b] [-driver NAME[:DSN]] [-quick] [-count N] [-out DIR] [-json] [-trace FILE] [-peers PYTHON]

Runs accelkit's benchmark suites, each figure beside the baseline it
replaces measured in the same run; prints a summary table and writes
results.json and report.html into -out. The redis suite starts a
redis-server of its own on a loopback port; without one in PATH it is
skipped (Debian/Ubuntu: apt-get install redis-server).

flags:
%s
Exit status: 0 on success (and for -h), 1 when a run fails (the driver
cannot be opened, an invariant suite fails, the outputs cannot be written;
with ACCELKIT_REQUIRE_REDIS set, the redis suite is one), 2 on a usage
error (unknown flag or suite, bad -count, -driver or -trace), 130 when
interrupted.
`

func run(args []string, stdout, stderr io.Writer, extra Extra, all []Suite) int {
	fl := flag.NewFlagSet("accbench", flag.ContinueOnError)
	fl.SetOutput(io.Discard) // errors and usage are printed below
	suitesFlag := fl.String("suite", "", "comma-separated suites to run (default: all); one of "+strings.Join(suiteNames(all), ", "))
	drvFlag := fl.String("driver", "auto", "driver: auto (CUDA when present, else sim), sim, cuda, or name:dsn")
	quick := fl.Bool("quick", false, "seconds instead of minutes: smaller workloads, for CI smoke runs")
	out := fl.String("out", "accbench-out", "directory for results.json, report.html and generated traces")
	jsonOut := fl.Bool("json", false, "print the summary table as JSON on stdout instead of text")
	count := fl.Int("count", 1, "repetitions of each suite, 1 to 100; the report gives median and spread")
	traceFile := fl.String("trace", "", "RMM logging CSV to replay in the replay suite (in addition to the built-in traces)")
	peers := fl.String("peers", "", "python interpreter with torch and cuda.core (e.g. /opt/torch/.venv/bin/python): run bench/peers beside the Go suites")
	printUsage := func(w io.Writer) {
		var flags strings.Builder
		fl.SetOutput(&flags)
		fl.PrintDefaults()
		fl.SetOutput(io.Discard)
		fmt.Fprintf(w, usage, flags.String())
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "accbench: %v\n\n", err)
		printUsage(stderr)
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "accbench: unexpected argument %q: accbench takes only flags (choose suites with -suite a,b); run accbench -h for usage\n", fl.Arg(0))
		return 2
	}
	if *count < 1 || *count > 100 {
		fmt.Fprintf(stderr, "accbench: -count %d: want 1..100\n", *count)
		return 2
	}
	chosen, err := selectSuites(all, *suitesFlag)
	if err != nil {
		fmt.Fprintln(stderr, "accbench:", err)
		return 2
	}
	name, dsn, err := driver.ParseSpec(*drvFlag)
	if err != nil {
		fmt.Fprintf(stderr, "accbench: -driver: %v\n", err)
		return 2
	}
	backends := append([]string{"auto"}, driver.Drivers()...)
	if !slices.Contains(backends, name) {
		fmt.Fprintf(stderr, "accbench: -driver %q: unknown backend %q; valid: %s, each optionally followed by :dsn\n", *drvFlag, name, strings.Join(backends, ", "))
		return 2
	}
	// -driver auto takes the backend and its configuration from
	// ACCELKIT_DRIVER when it is set: a mistake there is the same usage
	// error as in the flag, and the message names where it was made.
	drvFrom := fmt.Sprintf("-driver %q", *drvFlag)
	if spec := os.Getenv(driver.EnvDriver); name == "auto" && spec != "" {
		envName, _, err := driver.ParseSpec(spec)
		if err != nil {
			fmt.Fprintf(stderr, "accbench: %s: %v; valid backends: %s\n", driver.EnvDriver, err, strings.Join(backends[1:], ", "))
			return 2
		}
		if !slices.Contains(backends[1:], envName) {
			fmt.Fprintf(stderr, "accbench: %s=%q: unknown backend %q; valid: %s, each optionally followed by :dsn (or unset %s, or pass -driver NAME)\n",
				driver.EnvDriver, spec, envName, strings.Join(backends[1:], ", "), driver.EnvDriver)
			return 2
		}
		if dsn != "" {
			fmt.Fprintf(stderr, "accbench: -driver %q while %s=%q is set: the variable's configuration would be used, not the flag's; pass a backend name with its configuration, or unset %s\n",
				*drvFlag, driver.EnvDriver, spec, driver.EnvDriver)
			return 2
		}
		drvFrom = fmt.Sprintf("%s=%q", driver.EnvDriver, spec)
	}
	var traceEvents []trace.Event
	if *traceFile != "" {
		if !slices.ContainsFunc(chosen, func(s Suite) bool { return s.Name == "replay" }) {
			fmt.Fprintf(stderr, "accbench: -trace %s is replayed by the replay suite, which -suite %q leaves out\n", *traceFile, *suitesFlag)
			return 2
		}
		if traceEvents, err = loadTrace(*traceFile); err != nil {
			fmt.Fprintln(stderr, "accbench:", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	drv, err := driver.Open(name, dsn)
	if err != nil {
		// Backends refuse a bad configuration with ErrInvalidValue before
		// they touch a device: that is a usage error.
		if errors.Is(err, driver.ErrInvalidValue) || errors.Is(err, driver.ErrUnknownBackend) {
			fmt.Fprintf(stderr, "accbench: %s: %v\n", drvFrom, err)
			return 2
		}
		fmt.Fprintf(stderr, "accbench: open driver (%s): %v\n", drvFrom, err)
		return 1
	}
	defer drv.Close()
	dev, err := drv.Device(0)
	if err != nil {
		fmt.Fprintln(stderr, "accbench:", err)
		return 1
	}
	od, err := openOutDir(*out)
	if err != nil {
		fmt.Fprintln(stderr, "accbench:", err)
		return 1
	}
	defer od.Close()
	res := &report.Results{
		Schema: report.Schema, Started: time.Now(), Command: "accbench " + strings.Join(args, " "),
		Host: hostInfo(), Driver: drv.Name() + " (" + drv.Version() + ")", Device: dev.Name(),
		Simulated: isSimulated(dev), Quick: *quick, Count: *count, RatioLegend: report.RatioLegend,
	}
	warn := func(msg string) { fmt.Fprintln(stderr, "accbench: warning:", msg) }
	recordLoad(&res.Load, extra.loadavg, warn)
	env := &Env{Ctx: ctx, Driver: drv, Dev: dev, Simulated: res.Simulated, Quick: *quick, Out: *out, Trace: *traceFile, Extra: extra,
		out: od, traceEvents: traceEvents}
	start := time.Now()
	failed := false
	for _, s := range chosen {
		if ctx.Err() != nil {
			break
		}
		sr := runSuite(env, s, *count, stderr, start)
		if sr.Error != "" && s.Invariant {
			failed = true
		}
		res.Suites = append(res.Suites, sr)
	}
	if *peers != "" {
		env.progress = progressTo(stderr, "peers", start)
		if err := runPeers(env, *peers, res); err != nil {
			fmt.Fprintln(stderr, "accbench: peers:", err)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.Unmeasured = append(unmeasuredPeerGoals(res, *peers != ""), unmeasuredGPUGoals(res)...)
	res.Unmeasured = append(res.Unmeasured, unmeasuredH2DGoals(res)...)
	recordLoad(&res.Load, extra.loadavg, warn)
	if err := writeOutputs(res, od); err != nil {
		fmt.Fprintln(stderr, "accbench:", err)
		return 1
	}
	if *jsonOut {
		err = res.WriteJSON(stdout)
	} else {
		// The verdict ends the table; the full figures are in the files.
		fmt.Fprintf(stdout, "wrote %s\nwrote %s (every figure, with notes and charts)\n\n", filepath.Join(*out, "results.json"), filepath.Join(*out, "report.html"))
		err = res.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "accbench:", err)
		return 1
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "accbench: interrupted; the report holds the suites that finished")
		return 130
	}
	if failed {
		fmt.Fprintln(stderr, "accbench: a suite that must pass failed (see FAILED above)")
		return 1
	}
	return 0
}

func progressTo(w io.Writer, suite string, start time.Time) func(string) {
	return func(step string) {
		fmt.Fprintf(w, "[%6.1fs] %-16s %s\n", time.Since(start).Seconds(), suite, step)
	}
}

// runSuite runs s count times and aggregates its measurements by case.
func runSuite(env *Env, s Suite, count int, stderr io.Writer, start time.Time) report.Suite {
	env.progress = progressTo(stderr, s.Name, start)
	sr := report.Suite{Name: s.Name, Title: s.Title}
	t0 := time.Now()
	var outs []Output
	for rep := range count {
		if count > 1 {
			env.Step("repetition %d/%d", rep+1, count)
		}
		out, err := s.Run(env)
		if se := (*skipError)(nil); errors.As(err, &se) {
			sr.Skipped = se.reason
			env.Step("skipped: %s", se.reason)
			break
		}
		if err != nil {
			sr.Error = err.Error()
			env.Step("FAILED: %v", err)
			break
		}
		outs = append(outs, out)
	}
	sr.Seconds = time.Since(t0).Seconds()
	if len(outs) == 0 {
		return sr
	}
	sr.Rows = aggregate(outs)
	sr.Series = outs[len(outs)/2].Series // the median repetition's curves
	sr.Notes = outs[0].Notes
	env.Step("done in %.1fs", sr.Seconds)
	return sr
}

func aggregate(outs []Output) []report.Row {
	var rows []report.Row
	index := map[string]int{}
	ours := map[string][]float64{}
	base := map[string][]float64{}
	goals := map[string]Goal{}
	skipped := map[string]string{}
	for _, o := range outs {
		for _, m := range o.Measurements {
			if _, ok := index[m.Case]; !ok {
				index[m.Case] = len(rows)
				rows = append(rows, report.Row{Case: m.Case, Unit: m.Unit, BaseName: m.BaseName, HigherBetter: m.HigherBetter, Anchor: m.Anchor})
				goals[m.Case] = m.Goal
			}
			if m.Skipped != "" {
				skipped[m.Case] = m.Skipped
				continue
			}
			ours[m.Case] = append(ours[m.Case], m.Ours)
			if m.Base != 0 {
				base[m.Case] = append(base[m.Case], m.Base)
			}
		}
	}
	for i := range rows {
		r := &rows[i]
		if len(ours[r.Case]) == 0 { // skipped in every repetition
			r.Skipped = skipped[r.Case]
			continue
		}
		r.Ours = report.NewStat(ours[r.Case]...)
		if b := base[r.Case]; len(b) > 0 {
			st := report.NewStat(b...)
			r.Base = &st
		}
		r.ComputeRatio()
		if g := goals[r.Case]; !g.IsZero() {
			ok := g.Met(*r)
			r.Goal, r.GoalMet = g.Text(r.Unit), &ok
		}
	}
	return rows
}

// writeOutputs writes results.json and report.html, atomically and both
// in full before either replaces its old version.
func writeOutputs(res *report.Results, od *outDir) error {
	return od.writeFiles(
		outFile{"results.json", 0o644, res.WriteJSON},
		outFile{"report.html", 0o644, res.WriteHTML})
}

func isSimulated(dev driver.Device) bool {
	if pd, ok := dev.(driver.PropertiesDevice); ok {
		if p, err := pd.Properties(); err == nil {
			return p.Simulated
		}
	}
	return false
}

func hostInfo() report.Host {
	h := report.Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			h.MemoryGiB = (kb + 512<<10) >> 20
		}
	}
	return h
}

func suiteNames(all []Suite) []string {
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	return names
}

func selectSuites(all []Suite, list string) ([]Suite, error) {
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	var out []Suite
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(s Suite) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("-suite: unknown suite %q (suites: %s)", name, strings.Join(suiteNames(all), ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}
