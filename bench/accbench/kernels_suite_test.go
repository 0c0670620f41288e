package accbench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/bench/report"
	"github.com/accelkit/accelkit/driver/nvrtc"
	"github.com/accelkit/accelkit/driver/nvrtc/nvrtctest"
)

func runKernelsSuite(t *testing.T) (int, string, report.Suite) {
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
	return code, stdout.String(), res.Suites[0]
}

// TestKernelsSuite runs the kernels suite on the sim with the fake
// libnvrtc: every case, figures positive, the loop judged against its
// baseline, and the note that the figures are not a GPU's.
func TestKernelsSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real suite")
	}
	lib := nvrtctest.Build(t)
	t.Setenv(nvrtc.EnvLibrary, lib.Path)
	code, stdout, s := runKernelsSuite(t)
	if code != 0 || s.Error != "" || s.Skipped != "" {
		t.Fatalf("exit %d, error %q, skipped %q\n%s", code, s.Error, s.Skipped, stdout)
	}
	wants := map[string]struct {
		base bool
		goal string
	}{
		"cold compile of the reference kernels": {true, ""},
		kernelsWarmCase:                         {false, ""},
		kernelsLaunchCase:                       {false, ""},
		kernelsLoopCase:                         {true, ">= 5x"},
	}
	for _, r := range s.Rows {
		w, ok := wants[r.Case]
		if !ok {
			t.Errorf("unexpected row %q", r.Case)
			continue
		}
		delete(wants, r.Case)
		if r.Ours.Median <= 0 || (r.Base != nil) != w.base || w.base && (r.Base.Median <= 0 || r.Ratio <= 0) || r.Goal != w.goal {
			t.Errorf("row %q: %+v; want a positive figure, baseline %v, goal %q", r.Case, r, w.base, w.goal)
		}
	}
	for c := range wants {
		t.Errorf("no row %q", c)
	}
	if !strings.Contains(strings.Join(s.Notes, "\n"), "not a GPU's") {
		t.Errorf("notes do not say the sim's figures are not a GPU's: %q", s.Notes)
	}
	// NVRTC's compile counter proves the warm path never compiled: the
	// cold compiles (Load, then NVRTC alone), the warm path's one miss,
	// and nothing else.
	if n := lib.Count("nvrtcCompileProgram"); n != 2*2+1 {
		t.Errorf("nvrtcCompileProgram ran %d times, want 5 (two cold Loads, two NVRTC alone, one miss before the warm path)", n)
	}
}

// TestKernelsSuiteWithoutNVRTC: no libnvrtc, and the suite is skipped by
// name, saying why, and the run succeeds.
func TestKernelsSuiteWithoutNVRTC(t *testing.T) {
	t.Setenv(nvrtc.EnvLibrary, filepath.Join(t.TempDir(), "libnvrtc.so.none"))
	code, stdout, s := runKernelsSuite(t)
	if code != 0 || s.Skipped == "" || len(s.Rows) != 0 || !strings.Contains(s.Skipped, "NVRTC") {
		t.Fatalf("exit %d, skipped %q, %d rows; want skipped for want of NVRTC\n%s", code, s.Skipped, len(s.Rows), stdout)
	}
	if !strings.Contains(stdout, "kernels") || !strings.Contains(stdout, "SKIPPED") {
		t.Errorf("the table does not name the skipped suite:\n%s", stdout)
	}
}
