package accbench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/bench/report"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/nvrtc"
	"github.com/accelkit/accelkit/driver/nvrtc/nvrtctest"
)

func runKernelsSuite(t *testing.T) (int, string, *report.Results) {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Main([]string{"-quick", "-driver", "sim", "-suite", "kernels", "-out", out}, &stdout, &stderr, Extra{})
	f, err := os.Open(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatalf("exit %d, no results.json: %v\nstderr:\n%s", code, err, stderr.String())
	}
	defer f.Close()
	res, err := report.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Suites) != 1 || res.Suites[0].Name != "kernels" {
		t.Fatalf("results hold %+v, want the kernels suite", res.Suites)
	}
	return code, stdout.String(), res
}

// rowWant is what a kernels row must show: skipped with a reason holding
// skipped, or a positive figure with a baseline or not.
type rowWant struct {
	skipped string
	base    bool
}

func checkKernelsRows(t *testing.T, s report.Suite, wants map[string]rowWant) {
	t.Helper()
	for _, r := range s.Rows {
		w, ok := wants[r.Case]
		if !ok {
			t.Errorf("unexpected row %q", r.Case)
			continue
		}
		delete(wants, r.Case)
		if w.skipped != "" {
			if !strings.Contains(r.Skipped, w.skipped) || r.Ours.N != 0 || r.Base != nil || r.Goal != "" {
				t.Errorf("row %q: %+v; want skipped saying %q, no figures, no goal", r.Case, r, w.skipped)
			}
			continue
		}
		if r.Skipped != "" || r.Ours.Median <= 0 || (r.Base != nil) != w.base || w.base && (r.Base.Median <= 0 || r.Ratio <= 0) {
			t.Errorf("row %q: %+v; want a positive figure, baseline %v", r.Case, r, w.base)
		}
		if r.Goal != "" || r.GoalMet != nil {
			t.Errorf("row %q has goal %q on the sim; the kernels goals are judged on a GPU only", r.Case, r.Goal)
		}
	}
	for c := range wants {
		t.Errorf("no row %q", c)
	}
}

// checkGPUOnly: on the sim the kernels goals of the rows that ran are in
// the verdict as judged on a GPU only, and the notes say so.
func checkGPUOnly(t *testing.T, res *report.Results, cases ...string) {
	t.Helper()
	var got []string
	for _, u := range res.Unmeasured {
		if u.Suite == "kernels" {
			if !strings.Contains(u.Reason, "judged on a GPU only") {
				t.Errorf("unmeasured %+v; want the reason judged on a GPU only", u)
			}
			got = append(got, u.Case)
		}
	}
	if strings.Join(got, "|") != strings.Join(cases, "|") {
		t.Errorf("kernels goals not measurable here: %q; want %q", got, cases)
	}
	if notes := strings.Join(res.Suites[0].Notes, "\n"); !strings.Contains(notes, "not a GPU's") || !strings.Contains(notes, "judged on a GPU only") {
		t.Errorf("notes do not say the sim's figures are not a GPU's and the goals are judged on a GPU only: %q", notes)
	}
}

// TestKernelsSuite runs the kernels suite on the sim with the fake
// libnvrtc: every case, figures positive, the loop beside its baseline,
// no goal judged (they are a GPU's) and the verdict saying so.
func TestKernelsSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real suite")
	}
	lib := nvrtctest.Build(t)
	t.Setenv(nvrtc.EnvLibrary, lib.Path)
	code, stdout, res := runKernelsSuite(t)
	s := res.Suites[0]
	if code != 0 || s.Error != "" || s.Skipped != "" {
		t.Fatalf("exit %d, error %q, skipped %q\n%s", code, s.Error, s.Skipped, stdout)
	}
	checkKernelsRows(t, s, map[string]rowWant{
		kernelsColdCase:   {base: true},
		kernelsWarmCase:   {},
		kernelsLaunchCase: {}, // the sim has no raw cuLaunchKernel
		kernelsLoopCase:   {base: true},
	})
	checkGPUOnly(t, res, kernelsWarmCase, kernelsLaunchCase, kernelsLoopCase)
	// NVRTC's compile counter proves the warm path never compiled: the
	// cold compiles (Load, then NVRTC alone), the warm path's one miss,
	// and nothing else.
	if n := lib.Count("nvrtcCompileProgram"); n != 2*2+1 {
		t.Errorf("nvrtcCompileProgram ran %d times, want 5 (two cold Loads, two NVRTC alone, one miss before the warm path)", n)
	}
}

// TestKernelsSuiteWithoutNVRTC: no libnvrtc, and only the compile rows are
// skipped, by name in the table, saying "no NVRTC"; launch and loop run on
// the precompiled reference kernels, and the run succeeds.
func TestKernelsSuiteWithoutNVRTC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real suite")
	}
	t.Setenv(nvrtc.EnvLibrary, filepath.Join(t.TempDir(), "libnvrtc.so.none"))
	code, stdout, res := runKernelsSuite(t)
	s := res.Suites[0]
	if code != 0 || s.Error != "" || s.Skipped != "" {
		t.Fatalf("exit %d, error %q, skipped %q; want the suite to run without NVRTC\n%s", code, s.Error, s.Skipped, stdout)
	}
	checkKernelsRows(t, s, map[string]rowWant{
		kernelsColdCase:   {skipped: "no NVRTC: "},
		kernelsWarmCase:   {skipped: "no NVRTC: "},
		kernelsLaunchCase: {},
		kernelsLoopCase:   {base: true},
	})
	for _, c := range []string{kernelsColdCase, kernelsWarmCase} {
		if !strings.Contains(stdout, c+": SKIPPED") {
			t.Errorf("the table does not name the skipped case %q:\n%s", c, stdout)
		}
	}
	if !strings.Contains(stdout, kernelsColdCase+": SKIPPED: no NVRTC: ") {
		t.Errorf("the table does not say why the compile rows are skipped:\n%s", stdout)
	}
	checkGPUOnly(t, res, kernelsLaunchCase, kernelsLoopCase)
}

// TestKernelsGoalsOffTheSim runs the suite's Run on a sim device that the
// Env says is not simulated, with a Go loop standing in for the raw
// cuLaunchKernel loop (no CUDA here): the launch row gets its raw
// baseline, and the launch and loop rows their goals. Simulated, the same
// rows carry no goal.
func TestKernelsGoalsOffTheSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real suite")
	}
	t.Setenv(nvrtc.EnvLibrary, filepath.Join(t.TempDir(), "libnvrtc.so.none"))
	raws := 0
	defer func(f func(driver.Kernel, driver.Stream, driver.LaunchConfig, *driver.Args, int) error) {
		rawLaunchLoop = f
	}(rawLaunchLoop)
	rawLaunchLoop = func(k driver.Kernel, s driver.Stream, cfg driver.LaunchConfig, args *driver.Args, n int) error {
		raws += n
		for range n {
			if err := k.Launch(s, cfg, args); err != nil {
				return err
			}
		}
		return nil
	}
	drv, err := driver.Open("sim", "")
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, simulated := range []bool{false, true} {
		raws = 0
		out, err := kernelsSuite().Run(&Env{Ctx: context.Background(), Driver: drv, Dev: dev, Simulated: simulated, Quick: true})
		if err != nil {
			t.Fatalf("simulated %v: %v", simulated, err)
		}
		byCase := map[string]Measurement{}
		for _, m := range out.Measurements {
			byCase[m.Case] = m
		}
		launch, loop := byCase[kernelsLaunchCase], byCase[kernelsLoopCase]
		if launch.Base <= 0 || launch.BaseName != "raw cuLaunchKernel" || raws == 0 {
			t.Errorf("simulated %v: launch row %+v after %d raw launches; want the raw loop's figure beside ours", simulated, launch, raws)
		}
		wantLaunch, wantLoop := goalKernelsLaunch, goalKernelsLoop
		if simulated {
			wantLaunch, wantLoop = Goal{}, Goal{}
		}
		if launch.Goal != wantLaunch || loop.Goal != wantLoop {
			t.Errorf("simulated %v: goals launch %+v, loop %+v; want %+v, %+v", simulated, launch.Goal, loop.Goal, wantLaunch, wantLoop)
		}
	}
}

// TestKernelsUnmeasured: the verdict's kernels lines: every goal on the
// sim, off it only a launch row with no raw baseline (another backend); a
// skipped row is left to the table's own line, and a row whose goal was
// judged is not listed.
func TestKernelsUnmeasured(t *testing.T) {
	met := true
	rows := func() []report.Row {
		return []report.Row{
			{Case: kernelsWarmCase, Unit: "us/op", Skipped: "no NVRTC: none"},
			{Case: kernelsLaunchCase, Unit: "us/launch", Ours: report.NewStat(3)},
			{Case: kernelsLoopCase, Unit: "us/step", Ours: report.NewStat(3), Base: &report.Stat{Median: 30}},
		}
	}
	sim := &report.Results{Simulated: true, Suites: []report.Suite{{Name: "kernels", Rows: rows()}}}
	got := unmeasuredGPUGoals(sim)
	if len(got) != 2 || got[0].Case != kernelsLaunchCase || got[1].Case != kernelsLoopCase || got[1].Goal != ">= 5x Malloc per tensor" {
		t.Errorf("sim: %+v; want the launch and loop goals, judged on a GPU only", got)
	}
	gpu := &report.Results{Suites: []report.Suite{{Name: "kernels", Rows: rows()}}}
	gpu.Suites[0].Rows[2].GoalMet = &met
	got = unmeasuredGPUGoals(gpu)
	if len(got) != 1 || got[0].Case != kernelsLaunchCase || !strings.Contains(got[0].Reason, "no raw cuLaunchKernel loop") {
		t.Errorf("off the sim: %+v; want only the launch goal, for want of a raw loop", got)
	}
	if u := unmeasuredPeerGoals(gpu, true); len(u) != 0 {
		t.Errorf("peer goals of a skipped warm path listed: %+v", u)
	}
	if err := rawLaunchLoop(nil, nil, driver.LaunchConfig{}, nil, 0); err == nil || !errors.Is(err, driver.ErrInvalidValue) && !errors.Is(err, driver.ErrNotSupported) {
		t.Errorf("cuda.RawLaunchLoop of no kernel = %v; want a refusal (the suite reads it as no baseline)", err)
	}
}

// TestKernelsPeerMerge: cuda.core's warm path joins our row with its goal
// off the sim and the path it ran in the notes; on the sim it joins
// without a goal (a GPU's), and a skipped warm path takes no peer figure.
func TestKernelsPeerMerge(t *testing.T) {
	rec := peerRecord{Peer: "cuda.core", Version: "1.2.0", Case: "kernels_warm_path", Value: 90, Unit: "us/op",
		Path: "make_program_cache_key + cache.get + ObjectCode.from_cubin"}
	for _, simulated := range []bool{false, true} {
		res := &report.Results{Simulated: simulated, Suites: []report.Suite{{Name: "kernels", Rows: []report.Row{
			{Case: kernelsWarmCase, Unit: "us/op", Ours: report.NewStat(30)}}}}}
		mergePeers(res, []peerRecord{rec})
		row := res.Suites[0].Rows[0]
		if row.Base == nil || row.Ratio != 3 || !row.Peer || (row.GoalMet != nil) == simulated {
			t.Errorf("simulated %v: merged row %+v; want cuda.core's figure beside ours, the goal judged off the sim only", simulated, row)
		}
		if !simulated && (row.Goal != ">= 2x" || !*row.GoalMet) {
			t.Errorf("goal %q met %v; want >= 2x met", row.Goal, row.GoalMet)
		}
		if notes := strings.Join(res.Suites[0].Notes, "\n"); !strings.Contains(notes, rec.Path) {
			t.Errorf("notes %q do not say which path cuda.core ran", notes)
		}
	}
	res := &report.Results{Suites: []report.Suite{{Name: "kernels", Rows: []report.Row{
		{Case: kernelsWarmCase, Unit: "us/op", Skipped: "no NVRTC: none"}}}}}
	mergePeers(res, []peerRecord{rec})
	if row := res.Suites[0].Rows[0]; row.Base != nil || row.Goal != "" || len(res.Suites) != 2 || len(res.Suites[1].Rows) != 1 {
		t.Errorf("a skipped warm path took the peer figure: %+v; peers suite %+v", row, res.Suites[1:])
	}
}
