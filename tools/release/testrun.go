package release

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// RecordEnv names the folder where FilterTestJSON writes the tests it saw
// skip, for the summary RunSteps prints at the end of the test command.
const RecordEnv = "ACCELKIT_TEST_RECORD"

// A Skip is one test that skipped, with its message.
type Skip struct {
	Package, Test, Message string
}

// testEvent is one line of `go test -json` (cmd/test2json's TestEvent,
// with the ImportPath of Go 1.24's build-output events).
type testEvent struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// FilterTestJSON turns the output of `go test -json` back into what plain
// `go test` prints: each package's result line, and the output of the tests
// that fail (a passing or skipping test's is dropped, as go test drops it).
// It returns the tests that skipped, and failed is true when a test, a
// package or a build failed. Lines that are not JSON pass through.
func FilterTestJSON(r io.Reader, w io.Writer) (skips []Skip, failed bool, err error) {
	type key struct{ pkg, test string }
	buf := map[key][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e testEvent
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			if _, err := fmt.Fprintf(w, "%s\n", line); err != nil {
				return nil, true, err
			}
			continue
		}
		k := key{e.Package, e.Test}
		var print string
		switch e.Action {
		case "build-output":
			print = e.Output
		case "build-fail":
			failed = true
		case "output":
			switch {
			case e.Test != "":
				buf[k] = append(buf[k], e.Output)
			case e.Output != "PASS\n": // go test prints "ok pkg" without the binary's PASS
				print = e.Output
			}
		case "pass":
			delete(buf, k)
		case "skip":
			if e.Test != "" {
				skips = append(skips, Skip{Package: e.Package, Test: e.Test, Message: skipMessage(buf[k])})
			}
			delete(buf, k)
		case "fail":
			failed = true
			if e.Test == "" {
				break
			}
			// A subtest's output goes with its parent's, printed once the
			// top-level test ends, so a failure reads in one piece.
			if parent, _, ok := strings.Cut(e.Test, "/"); ok {
				pk := key{e.Package, parent}
				buf[pk] = append(buf[pk], buf[k]...)
			} else {
				print = strings.Join(buf[k], "")
			}
			delete(buf, k)
		}
		if print != "" {
			if _, err := io.WriteString(w, print); err != nil {
				return nil, true, err
			}
		}
	}
	// Tests still running when their binary died (a panic elsewhere, the
	// -timeout): their output explains the failure.
	var left []key
	for k, lines := range buf {
		if len(lines) > 0 {
			left = append(left, k)
		}
	}
	slices.SortFunc(left, func(a, b key) int { return strings.Compare(a.pkg+" "+a.test, b.pkg+" "+b.test) })
	for _, k := range left {
		if _, err := io.WriteString(w, strings.Join(buf[k], "")); err != nil {
			return nil, true, err
		}
	}
	return skips, failed, sc.Err()
}

// skipLine matches the framing lines of a test's output, which are not
// part of its message.
var skipLine = regexp.MustCompile(`^\s*(=== (RUN|PAUSE|CONT|NAME)|--- SKIP)`)

// fileLine is the "file_test.go:123: " prefix the testing package adds.
var fileLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// skipMessage is a skipped test's message: its output without the framing
// lines and the file:line prefixes.
func skipMessage(out []string) string {
	var msg []string
	for _, l := range strings.Split(strings.Join(out, ""), "\n") {
		if skipLine.MatchString(l) || strings.TrimSpace(l) == "" {
			continue
		}
		msg = append(msg, strings.TrimSpace(fileLine.ReplaceAllString(l, "")))
	}
	return strings.Join(msg, " ")
}

// WriteSkips appends skips to a new file in dir, one JSON object a line.
func WriteSkips(dir string, skips []Skip) error {
	f, err := os.CreateTemp(dir, "skips-*.jsonl")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, s := range skips {
		if err := enc.Encode(s); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// ReadSkips reads what WriteSkips wrote in dir.
func ReadSkips(dir string) ([]Skip, error) {
	files, err := filepath.Glob(filepath.Join(dir, "skips-*.jsonl"))
	if err != nil {
		return nil, err
	}
	var skips []Skip
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(strings.NewReader(string(data)))
		for dec.More() {
			var s Skip
			if err := dec.Decode(&s); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			skips = append(skips, s)
		}
	}
	return skips, nil
}

// A Client is a program beyond Go and gcc that some tests run, the real
// one, not a stand-in: .ci/testdeps.sh installs each and sets Require,
// under which its tests fail instead of skipping.
type Client struct {
	Name    string
	Require string         // ACCELKIT_REQUIRE_* variable
	Install string         // the Debian package, or "" when apt-get has none
	Other   string         // how to get it otherwise
	Match   *regexp.Regexp // in a skip message: the test skipped for want of this client
	Note    string         // where it is used, when not by the test command
	// present says whether the machine has it, and when not, why.
	present func(look func(string) (string, error)) (ok bool, why string)
}

// anyOf is present when one of the programs is in PATH.
func anyOf(names ...string) func(func(string) (string, error)) (bool, string) {
	return func(look func(string) (string, error)) (bool, string) {
		for _, n := range names {
			if _, err := look(n); err == nil {
				return true, ""
			}
		}
		return false, "not in PATH"
	}
}

// allOf is present when every program is in PATH.
func allOf(names ...string) func(func(string) (string, error)) (bool, string) {
	return func(look func(string) (string, error)) (bool, string) {
		var missing []string
		for _, n := range names {
			if _, err := look(n); err != nil {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return false, strings.Join(missing, " and ") + " not in PATH"
		}
		return true, ""
	}
}

// Clients are the programs of .ci/testdeps.sh (a test keeps the two lists
// equal), and PyTorch's memory viewer, which devalloc's viewer test runs
// under node.
var Clients = []Client{
	{Name: "redis-server", Require: "ACCELKIT_REQUIRE_REDIS", Install: "redis-server",
		Match: regexp.MustCompile(`redis-(server|cli)`), present: allOf("redis-server", "redis-cli")},
	{Name: "chromium", Require: "ACCELKIT_REQUIRE_CHROMIUM", Install: "chromium",
		Match: regexp.MustCompile(`(?i)chrom`), present: anyOf("chromium", "chromium-browser", "google-chrome")},
	{Name: "node", Require: "ACCELKIT_REQUIRE_NODE", Install: "nodejs",
		Match: regexp.MustCompile(`\bnode\b|Node\.js`), present: anyOf("node")},
	{Name: "MemoryViz.js", Require: "ACCELKIT_REQUIRE_MEMORYVIZ",
		Other: "ACCELKIT_MEMORYVIZ_JS=/path/to/pytorch/torch/utils/viz/MemoryViz.js (from a PyTorch source checkout: the wheels do not ship it)",
		Match: regexp.MustCompile(`MemoryViz`), present: memoryVizPresent},
	{Name: "python3", Require: "ACCELKIT_REQUIRE_PYTHON", Install: "python3",
		Match: regexp.MustCompile(`\bpython3?\b`), present: anyOf("python3")},
	{Name: "shellcheck", Require: "ACCELKIT_REQUIRE_SHELLCHECK", Install: "shellcheck",
		Match: regexp.MustCompile(`shellcheck`), present: anyOf("shellcheck"),
		Note: "the test command does not use it: `go tool task lint` (actionlint) checks the workflows' scripts with it"},
}

// memoryVizPresent finds PyTorch's MemoryViz.js as devalloc's viewer test
// does: ACCELKIT_MEMORYVIZ_JS, else the torch package of python3 (or
// ACCELKIT_PYTHON), located without importing it.
func memoryVizPresent(look func(string) (string, error)) (bool, string) {
	if p := os.Getenv("ACCELKIT_MEMORYVIZ_JS"); p != "" {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return false, "ACCELKIT_MEMORYVIZ_JS=" + p + " is no file"
		}
		return true, ""
	}
	py := os.Getenv("ACCELKIT_PYTHON")
	if py == "" {
		p, err := look("python3")
		if err != nil {
			return false, "no python3 to find PyTorch with"
		}
		py = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", "import importlib.util as u; s = u.find_spec('torch'); "+
		"print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return false, py + " has no torch package"
	}
	if _, err := os.Stat(filepath.Join(dir, "utils", "viz", "MemoryViz.js")); err != nil {
		return false, "torch at " + dir + " has no utils/viz/MemoryViz.js"
	}
	return true, ""
}

// An AbsentClient is a Client this machine lacks, and the checks that
// skipped for want of it.
type AbsentClient struct {
	Client
	Why     string
	Skipped []Skip
}

// ClientReport sorts skips by the absent client they waited for; the rest
// are other, skipped for reasons of their own (a platform, a short run).
func ClientReport(look func(string) (string, error), skips []Skip) (absent []AbsentClient, other []Skip) {
	for _, c := range Clients {
		if ok, why := c.present(look); !ok {
			absent = append(absent, AbsentClient{Client: c, Why: why})
		}
	}
next:
	for _, s := range skips {
		for i := range absent {
			if absent[i].Match.MatchString(s.Message) {
				absent[i].Skipped = append(absent[i].Skipped, s)
				continue next
			}
		}
		other = append(other, s)
	}
	return absent, other
}

// WriteClientReport prints which clients are absent, what skipped for want
// of each, and the lines that install them.
func WriteClientReport(w io.Writer, absent []AbsentClient, other []Skip) {
	if len(absent) == 0 {
		names := make([]string, len(Clients))
		for i, c := range Clients {
			names[i] = c.Name
		}
		fmt.Fprintf(w, "test programs: all present (%s); no check skipped for want of one\n", strings.Join(names, ", "))
	} else {
		fmt.Fprintln(w, "test programs absent here (their checks skip; under .ci/run, which installs them, they must not):")
		var apt, others []string
		for _, a := range absent {
			switch {
			case a.Note != "":
				fmt.Fprintf(w, "  %s: %s; %s\n", a.Name, a.Why, a.Note)
			case len(a.Skipped) == 0:
				fmt.Fprintf(w, "  %s: %s; no check skipped for it in this run\n", a.Name, a.Why)
			default:
				fmt.Fprintf(w, "  %s: %s; %d check(s) skipped:\n", a.Name, a.Why, len(a.Skipped))
				for _, line := range groupSkips(a.Skipped) {
					fmt.Fprintf(w, "      %s\n", line)
				}
			}
			if a.Install != "" {
				apt = append(apt, a.Install)
			} else if a.Other != "" {
				others = append(others, a.Other)
			}
		}
		if len(apt) > 0 {
			fmt.Fprintf(w, "  install (Debian, Ubuntu): sudo apt-get install -y %s\n", strings.Join(apt, " "))
		}
		for _, o := range others {
			fmt.Fprintf(w, "  install: %s\n", o)
		}
	}
	if len(other) > 0 {
		// A backend without a feature, a helper process: expected, and
		// too many to list; go test -v names each with its reason.
		fmt.Fprintf(w, "%d other check(s) skipped for reasons of their own, none for want of a program (go test -v says why)\n", len(other))
	}
}

// groupSkips lists skipped tests by package: "progcache/redistier: TestA, TestB".
func groupSkips(skips []Skip) []string {
	by := map[string][]string{}
	for _, s := range skips {
		pkg := strings.TrimPrefix(s.Package, ModulePrefix)
		by[pkg] = append(by[pkg], s.Test)
	}
	var lines []string
	for _, pkg := range SortedKeys(by) {
		tests := by[pkg]
		slices.Sort(tests)
		lines = append(lines, pkg+": "+strings.Join(slices.Compact(tests), ", "))
	}
	return lines
}

// A StepTime is how long one step of RunSteps took.
type StepTime struct {
	Name    string
	Group   int // steps of one group ran at once
	Wall    time.Duration
	Err     error
	Started bool
}

// RunSteps runs groups of steps one group after the other, stopping after
// the first group with a failure; the steps of one group run at once. The
// first step of a group writes to stdout and stderr as it goes; the
// others' output is held and written, whole and under a header, once both
// it and the first have ended, so no two steps' lines mix. It returns each step's wall time (steps after a
// failure are not started) and the first error.
func RunSteps(groups [][]string, command func(step string) *exec.Cmd, stdout, stderr io.Writer) ([]StepTime, error) {
	var times []StepTime
	var firstErr error
	for g, group := range groups {
		if firstErr != nil {
			for _, s := range group {
				times = append(times, StepTime{Name: s, Group: g})
			}
			continue
		}
		type result struct {
			i   int
			t   StepTime
			out []byte
		}
		done := make(chan result, len(group))
		for i, s := range group {
			cmd := command(s)
			var held *lockedBuffer
			if i == 0 {
				cmd.Stdout, cmd.Stderr = stdout, stderr
			} else {
				held = &lockedBuffer{}
				cmd.Stdout, cmd.Stderr = held, held
			}
			go func() {
				start := time.Now()
				err := cmd.Run()
				if err != nil {
					err = fmt.Errorf("%s: %w", s, err)
				}
				r := result{i: i, t: StepTime{Name: s, Group: g, Wall: time.Since(start), Err: err, Started: true}}
				if held != nil {
					r.out = held.Bytes()
				}
				done <- r
			}()
		}
		// A held output is written once the live step has ended, so it
		// never lands in the middle of one of the live step's lines.
		results := make([]StepTime, len(group))
		var pending []result
		liveDone := false
		for range group {
			r := <-done
			results[r.i] = r.t
			if r.i == 0 {
				liveDone = true
			} else {
				pending = append(pending, r)
			}
			if liveDone {
				for _, p := range pending {
					fmt.Fprintf(stdout, "== %s (ran beside %s):\n", p.t.Name, group[0])
					stdout.Write(p.out)
				}
				pending = nil
			}
		}
		for _, t := range results {
			if t.Err != nil && firstErr == nil {
				firstErr = t.Err
			}
		}
		times = append(times, results...)
	}
	return times, firstErr
}

// WriteStepTimes prints the wall time of each step and of all of them.
func WriteStepTimes(w io.Writer, times []StepTime, total time.Duration) {
	fmt.Fprintln(w, "step times (wall):")
	for _, t := range times {
		if !t.Started {
			fmt.Fprintf(w, "  %-16s not run\n", t.Name)
			continue
		}
		note := ""
		if t.Err != nil {
			note = "  FAILED"
		}
		var with []string
		for _, o := range times {
			if o.Group == t.Group && o.Name != t.Name {
				with = append(with, o.Name)
			}
		}
		if len(with) > 0 {
			note += "  (at once with " + strings.Join(with, ", ") + ")"
		}
		fmt.Fprintf(w, "  %-16s %7s%s\n", t.Name, fmtDuration(t.Wall), note)
	}
	fmt.Fprintf(w, "  %-16s %7s\n", "total", fmtDuration(total))
}

func fmtDuration(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// lockedBuffer is a bytes.Buffer two writers (a command's stdout and
// stderr copiers) may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf
}

// LoadAverage is the 1-minute load average from /proc/loadavg, or "n/a"
// where there is none.
func LoadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "n/a"
}
