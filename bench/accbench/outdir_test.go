package accbench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/bench/report"
)

// failAfter fails every write once n bytes have gone through.
type failAfter struct {
	w io.Writer
	n int
}

var errInjected = errors.New("injected write failure")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n, _ := f.w.Write(p[:f.n])
		f.n -= n
		return n, errInjected
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// bigSuite has enough rows for results.json and report.html of some KiB.
func bigSuite() Suite {
	return Suite{Name: "big", Run: func(env *Env) (Output, error) {
		var out Output
		for i := range 200 {
			out.Measurements = append(out.Measurements, Measurement{Case: fmt.Sprintf("case %d", i), Unit: "ns/op", Ours: float64(i + 1), Base: 1000, BaseName: "base"})
		}
		return out, nil
	}}
}

func oldOutputs(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{"results.json", "report.html"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("old "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func checkOldOutputs(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{"results.json", "report.html"} {
		if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != "old "+name {
			t.Errorf("%s changed to %.40q", name, got)
		}
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"report.html", "results.json"}) {
		t.Errorf("-out holds %q after the failure, want only the two old files", names)
	}
}

// TestWriteOutputsFailureLeavesOld fails the write of report.html partway
// (the seam): neither output is replaced, since both are written in full
// before either is renamed, and no temporary file is left.
func TestWriteOutputsFailureLeavesOld(t *testing.T) {
	dir := t.TempDir()
	oldOutputs(t, dir)
	defer func(w func(io.Writer) io.Writer) { wrapWriter = w }(wrapWriter)
	calls := 0
	wrapWriter = func(w io.Writer) io.Writer {
		if calls++; calls == 2 {
			return &failAfter{w: w, n: 2000}
		}
		return w
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-driver", "sim", "-out", dir}, &stdout, &stderr, Extra{}, []Suite{bigSuite()})
	if code != 1 || !strings.Contains(stderr.String(), "report.html") || !strings.Contains(stderr.String(), errInjected.Error()) {
		t.Errorf("exit %d, stderr %q: want 1 and the failure named", code, stderr.String())
	}
	checkOldOutputs(t, dir)

	// Without the failure both are replaced and read back.
	wrapWriter = func(w io.Writer) io.Writer { return w }
	if code := run([]string{"-driver", "sim", "-out", dir}, &stdout, &stderr, Extra{}, []Suite{bigSuite()}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	f, err := os.Open(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if res, err := report.ReadJSON(f); err != nil || len(res.Suites) != 1 || len(res.Suites[0].Rows) != 200 {
		t.Errorf("results.json: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "report.html")); err != nil || fi.Size() < 4096 {
		t.Errorf("report.html: %v", err)
	}
}

// TestOutputsNeverWriteThroughSymlinks: a symlink at results.json is
// refused, neither written through nor replaced (atomicfile's policy;
// before, the link was replaced), and a traces/ that is a symlink out of
// -out is refused rather than followed.
func TestOutputsNeverWriteThroughSymlinks(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	precious := filepath.Join(outside, "precious.json")
	if err := os.WriteFile(precious, []byte("not yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "results.json")
	if err := os.Symlink(precious, link); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-driver", "sim", "-out", dir}, &stdout, &stderr, Extra{}, []Suite{bigSuite()})
	if code != 1 || !strings.Contains(stderr.String(), "results.json") || !strings.Contains(stderr.String(), "symbolic link") {
		t.Errorf("exit %d, stderr %q: want 1 and the link named", code, stderr.String())
	}
	if got, _ := os.ReadFile(precious); string(got) != "not yours" {
		t.Errorf("the file results.json linked to was written: %.40q", got)
	}
	if got, err := os.Readlink(link); err != nil || got != precious {
		t.Errorf("results.json is now %q, %v; want the link untouched", got, err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"results.json"}) {
		t.Errorf("-out holds %q, want only the link (report.html is renamed only with results.json)", names)
	}

	dir = t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "traces")); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code = Main([]string{"-quick", "-driver", "sim", "-suite", "replay", "-out", dir}, &stdout, &stderr, Extra{})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if names := dirNames(t, outside); !slices.Equal(names, []string{"precious.json"}) {
		t.Errorf("the directory traces/ linked to now holds %q", names)
	}
	if !strings.Contains(stdout.String(), "FAILED") || !strings.Contains(stderr.String(), "traces") {
		t.Errorf("the replay suite should fail on the escaping traces/ link:\n%s\n%s", stdout.String(), stderr.String())
	}
}
