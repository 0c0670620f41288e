package release

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFilterTestJSON runs the real go test -json over a package with a
// passing, a failing (in a subtest) and two skipping tests, and a package
// that does not build, and reads back go test's plain output.
func TestFilterTestJSON(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26\n",
		"ok/ok_test.go": "package ok\n\nimport \"testing\"\n\n" +
			"func TestPass(t *testing.T) { t.Log(\"chatter of a passing test\") }\n\n" +
			"func TestSub(t *testing.T) {\n\tt.Run(\"inner\", func(t *testing.T) { t.Fatal(\"the inner check broke\") })\n}\n\n" +
			"func TestRedis(t *testing.T) { t.Skip(\"redis-server not found in PATH: install it (Debian/Ubuntu: apt-get install redis-server)\") }\n\n" +
			"func TestShort(t *testing.T) {\n\tt.Log(\"why:\")\n\tt.Skip(\"too slow for -short\")\n}\n",
		"broken/b.go": "package broken\n\nfunc F() int { return \"x\" }\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	js, err := cmd.Output()
	if err == nil {
		t.Fatal("go test passed a failing package")
	}
	var out bytes.Buffer
	skips, failed, err := FilterTestJSON(bytes.NewReader(js), &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"--- FAIL: TestSub", "--- FAIL: TestSub/inner", "the inner check broke", "FAIL\texample.com/m/ok", "cannot use \"x\""} {
		if !strings.Contains(got, want) {
			t.Errorf("filtered output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"chatter of a passing test", "=== RUN   TestPass", "TestRedis", "\nPASS\n", "{\"Time\""} {
		if strings.Contains(got, unwanted) {
			t.Errorf("filtered output has %q:\n%s", unwanted, got)
		}
	}
	if !failed {
		t.Error("failed = false for a failing run")
	}
	want := []Skip{
		{"example.com/m/ok", "TestRedis", "redis-server not found in PATH: install it (Debian/Ubuntu: apt-get install redis-server)"},
		{"example.com/m/ok", "TestShort", "why: too slow for -short"},
	}
	if !slices.Equal(skips, want) {
		t.Errorf("skips = %q, want %q", skips, want)
	}

	// Text that is not an event passes through; a passing stream is no failure.
	out.Reset()
	in := "not json\n{\"Action\":\"output\",\"Package\":\"p\",\"Output\":\"ok  \\tp\\t0.1s\\n\"}\n{\"Action\":\"pass\",\"Package\":\"p\"}\n"
	if _, failed, err := FilterTestJSON(strings.NewReader(in), &out); failed || err != nil || out.String() != "not json\nok  \tp\t0.1s\n" {
		t.Errorf("FilterTestJSON(%q) = %q, failed %v, %v", in, out.String(), failed, err)
	}

	// A test cut off by its binary's death keeps its output.
	out.Reset()
	in = `{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"    h_test.go:9: waiting on the lease\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 10m0s\n"}
{"Action":"fail","Package":"p"}
`
	if _, failed, err := FilterTestJSON(strings.NewReader(in), &out); !failed || err != nil || !strings.Contains(out.String(), "waiting on the lease") {
		t.Errorf("a test cut off: %q, failed %v, %v", out.String(), failed, err)
	}
}

func TestSkipsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a := []Skip{{"p", "TestA", "m\nn"}}
	b := []Skip{{"q", "TestB", ""}, {"q", "TestC", "x"}}
	if err := WriteSkips(dir, a); err != nil {
		t.Fatal(err)
	}
	if err := WriteSkips(dir, b); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSkips(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y Skip) int { return strings.Compare(x.Test, y.Test) })
	if want := append(a, b...); !slices.Equal(got, want) {
		t.Errorf("ReadSkips = %q, want %q", got, want)
	}
}

// TestClientReport: with redis, chromium and python3 missing, each skip
// (the messages the repository's tests give) goes to the program it waited
// for, and the install line names exactly the missing packages.
func TestClientReport(t *testing.T) {
	t.Setenv("ACCELKIT_MEMORYVIZ_JS", "")
	t.Setenv("ACCELKIT_PYTHON", "")
	missing := map[string]bool{"redis-cli": true, "chromium": true, "chromium-browser": true, "google-chrome": true, "python3": true}
	look := func(name string) (string, error) {
		if missing[name] {
			return "", exec.ErrNotFound
		}
		return "/usr/bin/" + name, nil
	}
	skips := []Skip{
		{ModulePrefix + "progcache/redistier", "TestCluster", "redis-server not found in PATH: install it (Debian/Ubuntu: apt-get install redis-server; the tests need redis-server and redis-cli 7 or newer)"},
		{ModulePrefix + "bench/report", "TestHTMLInChromium", "no chromium installed (apt-get install chromium)"},
		{ModulePrefix + "devalloc", "TestPickleMatchesPython", "python3 is not installed: the pickle is checked by the Go decoder tests only"},
		{ModulePrefix + "devalloc", "TestViewerReadsSegments", "PyTorch's viewer (torch/utils/viz/MemoryViz.js) not found: no python3 is installed to find PyTorch with; to run this test install PyTorch for python3"},
		{ModulePrefix + "driver", "TestLongRun", "too slow for -short"},
	}
	absent, other := ClientReport(look, skips)
	names := map[string][]string{}
	for _, a := range absent {
		var tests []string
		for _, s := range a.Skipped {
			tests = append(tests, s.Test)
		}
		names[a.Name] = tests
	}
	wantNames := map[string][]string{
		"redis-server": {"TestCluster"}, "chromium": {"TestHTMLInChromium"},
		"MemoryViz.js": {"TestViewerReadsSegments"}, "python3": {"TestPickleMatchesPython"},
	}
	if len(names) != len(wantNames) {
		t.Errorf("absent clients %q, want %q", names, wantNames)
	}
	for n, w := range wantNames {
		if !slices.Equal(names[n], w) {
			t.Errorf("%s: skipped %q, want %q", n, names[n], w)
		}
	}
	if len(other) != 1 || other[0].Test != "TestLongRun" {
		t.Errorf("other skips %q, want TestLongRun", other)
	}
	var out bytes.Buffer
	WriteClientReport(&out, absent, other)
	for _, want := range []string{
		"redis-server: redis-cli not in PATH; 1 check(s) skipped:\n      progcache/redistier: TestCluster\n",
		"sudo apt-get install -y redis-server chromium python3\n",
		"install: ACCELKIT_MEMORYVIZ_JS=/path/to/pytorch/torch/utils/viz/MemoryViz.js",
		"1 other check(s) skipped for reasons of their own, none for want of a program",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}

	// Everything present: one line, no install.
	out.Reset()
	t.Setenv("ACCELKIT_MEMORYVIZ_JS", filepath.Join(t.TempDir()))
	if ok, why := memoryVizPresent(look); ok || !strings.Contains(why, "is no file") {
		t.Errorf("ACCELKIT_MEMORYVIZ_JS naming a folder: present %v, %q", ok, why)
	}
	viz := filepath.Join(t.TempDir(), "MemoryViz.js")
	if err := os.WriteFile(viz, []byte("// viewer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ACCELKIT_MEMORYVIZ_JS", viz)
	all := func(name string) (string, error) { return "/usr/bin/" + name, nil }
	absent, other = ClientReport(all, nil)
	WriteClientReport(&out, absent, other)
	if len(absent) != 0 || !strings.HasPrefix(out.String(), "test programs: all present") || strings.Contains(out.String(), "apt-get") {
		t.Errorf("all present: %q", out.String())
	}
}

// TestClientsMatchTestdeps keeps Clients and .ci/testdeps.sh, which
// installs them for .ci/run and the workflow, naming the same programs,
// variables and Debian packages.
func TestClientsMatchTestdeps(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, ".ci", "testdeps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(data)
	need := regexp.MustCompile(`(?m)^testdeps_need (ACCELKIT_REQUIRE_\w+) (\S+)`)
	vars := regexp.MustCompile(`ACCELKIT_REQUIRE_\w+`)
	for _, v := range slices.Compact(slices.Sorted(slices.Values(vars.FindAllString(script, -1)))) {
		i := slices.IndexFunc(Clients, func(c Client) bool { return c.Require == v })
		if i < 0 {
			t.Errorf(".ci/testdeps.sh sets %s, which no Client has", v)
		}
	}
	for _, m := range need.FindAllStringSubmatch(script, -1) {
		i := slices.IndexFunc(Clients, func(c Client) bool { return c.Require == m[1] })
		if i >= 0 && Clients[i].Install != m[2] {
			t.Errorf("%s: .ci/testdeps.sh installs %s, the summary says %s", m[1], m[2], Clients[i].Install)
		}
	}
	for _, c := range Clients {
		if c.Install != "" && !strings.Contains(script, c.Require) {
			t.Errorf("Client %s (%s) is not in .ci/testdeps.sh", c.Name, c.Require)
		}
	}
}

// TestRunSteps: a group runs at once with its outputs apart, a failing
// group stops the rest, and every step has its time.
func TestRunSteps(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no POSIX shell")
	}
	scripts := map[string]string{
		// a and b run at once: each waits for the other's file. b ends
		// first, but its output waits for a's end.
		"a":    "touch a.started; while [ ! -e b.started ]; do sleep 0.01; done; echo a-err >&2; sleep 0.2; echo a-out",
		"b":    "touch b.started; while [ ! -e a.started ]; do sleep 0.01; done; echo b-one; echo b-two",
		"fail": "echo failing; exit 3",
		"late": "echo never",
	}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	times, err := RunSteps([][]string{{"a", "b"}, {"fail"}, {"late"}}, func(step string) *exec.Cmd {
		cmd := exec.Command(sh, "-c", scripts[step])
		cmd.Dir = dir
		return cmd
	}, &stdout, &stderr)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.HasPrefix(err.Error(), "fail: ") {
		t.Fatalf("err = %v, want fail's exit status 3", err)
	}
	if got, want := stdout.String(), "a-out\n== b (ran beside a):\nb-one\nb-two\nfailing\n"; got != want {
		t.Errorf("stdout %q, want %q: a's line, b's after a's end, fail's, and nothing of the step after the failure", got, want)
	}
	if stderr.String() != "a-err\n" {
		t.Errorf("stderr %q, want a's", stderr.String())
	}
	var names []string
	for _, st := range times {
		names = append(names, st.Name)
		if st.Started && (st.Wall <= 0 || st.Wall > time.Since(start)) {
			t.Errorf("%s took %v", st.Name, st.Wall)
		}
	}
	if !slices.Equal(names, []string{"a", "b", "fail", "late"}) || times[3].Started || times[2].Err == nil || times[0].Group != times[1].Group {
		t.Errorf("times = %+v", times)
	}
	var sum bytes.Buffer
	WriteStepTimes(&sum, times, time.Since(start))
	for _, want := range []string{"(at once with b)", "FAILED", "late             not run", "total"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("step times lack %q:\n%s", want, sum.String())
		}
	}
}
