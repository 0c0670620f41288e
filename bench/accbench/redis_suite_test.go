package accbench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/accelkit/accelkit/bench/report"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
)

// runRedisSuite runs accbench -quick -suite redis and returns its exit
// code, its stdout and stderr, and the redis suite of its results.json.
func runRedisSuite(t *testing.T) (int, string, string, report.Suite) {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Main([]string{"-quick", "-driver", "sim", "-suite", "redis", "-out", out}, &stdout, &stderr, Extra{})
	f, err := os.Open(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatalf("exit %d, no results.json: %v\nstderr:\n%s", code, err, stderr.String())
	}
	defer f.Close()
	res, err := report.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Suites) != 1 || res.Suites[0].Name != "redis" {
		t.Fatalf("results hold %d suites (%+v), want the redis suite", len(res.Suites), res.Suites)
	}
	return code, stdout.String(), stderr.String(), res.Suites[0]
}

// TestRedisSuite runs the redis suite with -quick on the server it
// starts and checks its rows: every case the issue names, each with a
// positive figure, its baseline and a ratio, the goals on the 64 KiB and
// tiered rows, and the server gone afterwards. It compares no figure with
// another: timings are the report's business.
func TestRedisSuite(t *testing.T) {
	redistest.Binary(t)
	code, stdout, stderr, s := runRedisSuite(t)
	if code != 0 || s.Error != "" || s.Skipped != "" {
		t.Fatalf("exit %d, error %q, skipped %q\nstderr:\n%s", code, s.Error, s.Skipped, stderr)
	}
	type want struct {
		unit string
		goal string // "" for none
	}
	wants := map[string]want{
		"prefetch 1,000 keys of 4 KiB, GMAC":  {"ms/op", ""},
		"get hit 64 KiB, GMAC, 32 goroutines": {"ops/s", ""},
		"tiered get 64 KiB, memory local":     {"us/op", ">= 0.9091x"},
		"tiered get 64 KiB, filestream local": {"us/op", ">= 0.9091x"},
		"get hit 64 KiB, GMAC":                {"us/op", ">= 0.8333x"},
		"put 64 KiB, CRC":                     {"us/op", ">= 0.8333x"},
		"get hit 1 MiB, CRC":                  {"us/op", ""},
		"put 4 KiB, GMAC":                     {"us/op", ""},
		"get hit 4 KiB, CRC":                  {"us/op", ""},
		"put 1 MiB, GMAC":                     {"us/op", ""},
		"get hit 64 KiB, CRC":                 {"us/op", ">= 0.8333x"},
		"put 64 KiB, GMAC":                    {"us/op", ">= 0.8333x"},
		"get hit 4 KiB, GMAC":                 {"us/op", ""},
		"put 4 KiB, CRC":                      {"us/op", ""},
		"get hit 1 MiB, GMAC":                 {"us/op", ""},
		"put 1 MiB, CRC":                      {"us/op", ""},
	}
	if len(s.Rows) != len(wants) {
		t.Errorf("%d rows, want %d", len(s.Rows), len(wants))
	}
	for _, r := range s.Rows {
		w, ok := wants[r.Case]
		if !ok {
			t.Errorf("unexpected row %q", r.Case)
			continue
		}
		delete(wants, r.Case)
		if r.Unit != w.unit || r.Ours.Median <= 0 || r.Base == nil || r.Base.Median <= 0 || r.BaseName == "" || r.Ratio <= 0 {
			t.Errorf("row %q: %+v; want %s figures for ours and a named baseline, and their ratio", r.Case, r, w.unit)
		}
		if r.Goal != w.goal || (r.GoalMet == nil) != (w.goal == "") {
			t.Errorf("row %q: goal %q judged %v, want %q", r.Case, r.Goal, r.GoalMet != nil, w.goal)
		}
		if !strings.Contains(stdout, r.Case) {
			t.Errorf("the table lacks row %q", r.Case)
		}
	}
	for c := range wants {
		t.Errorf("no row %q", c)
	}
	if len(s.Notes) == 0 {
		t.Error("no notes: the rows' clients and method go unexplained")
	}
	m := regexp.MustCompile(`redis-server (\d+) on 127\.0\.0\.1:\d+`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("progress does not name the server's PID:\n%s", stderr)
	}
	pid, _ := strconv.Atoi(m[1])
	if p, err := os.FindProcess(pid); err == nil && p.Signal(syscall.Signal(0)) == nil {
		t.Errorf("redis-server %d still runs after the suite", pid)
	}
}

// TestRedisSuiteWithoutServer checks the suite without redis-server in
// PATH: skipped, saying how to install it, and the run a success; or,
// under ACCELKIT_REQUIRE_REDIS, failed and the run a failure.
func TestRedisSuiteWithoutServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	const hint = "apt-get install redis-server"
	for _, tc := range []struct {
		require string
		code    int
		table   string
	}{
		{"", 0, "SKIPPED: redis-server not found in PATH: install it to run this suite"},
		{"1", 1, "FAILED: redis-server not found in PATH: install it to run this suite"},
	} {
		t.Run(fmt.Sprintf("%s=%q", redistest.RequireEnv, tc.require), func(t *testing.T) {
			t.Setenv(redistest.RequireEnv, tc.require)
			code, stdout, stderr, s := runRedisSuite(t)
			if code != tc.code || !strings.Contains(stdout, tc.table) {
				t.Errorf("exit %d, want %d; table:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			if len(s.Rows) != 0 {
				t.Errorf("%d rows without a server", len(s.Rows))
			}
			if tc.require == "" {
				if s.Error != "" || !strings.Contains(s.Skipped, hint) {
					t.Errorf("error %q, skipped %q; want skipped, saying %q", s.Error, s.Skipped, hint)
				}
			} else if s.Skipped != "" || !strings.Contains(s.Error, hint) || !strings.Contains(s.Error, redistest.RequireEnv+" is set") {
				t.Errorf("error %q, skipped %q; want an error saying %q and that %s is set", s.Error, s.Skipped, hint, redistest.RequireEnv)
			}
		})
	}
}
