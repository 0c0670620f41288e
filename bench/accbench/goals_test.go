package accbench

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/bench/report"
)

// TestGoalsKeepTheirVerdicts checks every goal against the test it had
// before goals were written in the ratio's direction (the closures below
// are the old GoalOK functions, verbatim) on a grid of figures, and that
// the new text states the verdict it gives: ">= Nx" on the ratio, "ours
// <= V" / "ours < V" on our figure.
func TestGoalsKeepTheirVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name         string
		goal         Goal
		unit         string
		higherBetter bool
		text         string
		old          func(r report.Row) bool
	}{
		{"churn", goalChurn, "ns/op", false, ">= 20x", func(r report.Row) bool { return r.Ratio >= 20 }},
		{"frag plain", goalFragPlain, "x", false, "ours <= 1.326", func(r report.Row) bool { return r.Ours.Median <= 1.3257 }},
		{"frag expandable", goalFragExpandable, "x", false, "ours <= 1.044", func(r report.Row) bool { return r.Ours.Median <= 1.044 }},
		{"shapes plain", goalShapesPlain, "x", false, ">= 1.25x, ours <= 1.178", func(r report.Row) bool { return r.Ratio >= 1.25 && r.Ours.Median <= 0.8*1.473 }},
		{"shapes expandable", goalShapesExpandable, "x", false, "ours <= 1.044", func(r report.Row) bool { return r.Ours.Median <= 1.044 }},
		{"hostpin fresh", goalHostpinFresh, "ns/op", false, ">= 100x", func(r report.Row) bool { return r.Ratio >= 100 }},
		{"waste mean", goalWasteMean, "x", false, "ours <= 1.1", func(r report.Row) bool { return r.Ours.Median <= 1.10 }},
		{"waste max", goalWasteMax, "x", false, "ours <= 1.25", func(r report.Row) bool { return r.Ours.Median <= 1.25 }},
		{"memory get", goalMemoryGet, "us/op", false, "ours < 1 us/op", func(r report.Row) bool { return r.Ours.Median < 1 }},
		{"filestream vs cuda.core", goalFilestreamCC, "us/op", false, ">= 2x", func(r report.Row) bool { return r.Ratio >= 2 }},
		{"MakeKey", goalMakeKey, "us/op", false, ">= 0.9091x", func(r report.Row) bool { return r.Ratio >= 1/1.1 }},
		{"filestream view", goalFilestreamRaw, "us/op", false, ">= 0.9524x", func(r report.Row) bool { return r.Ratio >= 1/1.05 }},
		{"redis 64 KiB", goalRedis64K, "us/op", false, ">= 0.8333x", func(r report.Row) bool { return r.Ratio >= 1/1.2 }},
		{"tiered", goalTiered, "us/op", false, ">= 0.9091x", func(r report.Row) bool { return r.Ratio >= 1/1.1 }},
		{"wrlru latency", goalWrlruLatency, "ns/op", false, ">= 0.6667x", func(r report.Row) bool { return r.Ours.Median <= 1.5*r.Base.Median }},
		{"wrlru throughput", goalWrlruThroughput, "Mops/s", true, ">= 2x", func(r report.Row) bool { return r.Ratio >= 2 }},
		{"graphpass alloc", goalGraphpassAlloc, "x", false, "ours <= 3", func(r report.Row) bool { return r.Ours.Median <= 3 }},
		{"hit path vs PyTorch", goalHitPathVsTorch, "ns/pair", false, ">= 2x", func(r report.Row) bool { return r.Ratio >= 2 }},
		{"hostpin vs PyTorch", goalHostpinVsTorch, "ns/op", false, ">= 1x", func(r report.Row) bool { return r.Ratio >= 1 }},
		{"shapes vs PyTorch", goalShapesVsTorch, "x", false, ">= 1.25x", func(r report.Row) bool { return r.Ratio >= 1.25 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := tc.goal.Text(tc.unit)
			if text != tc.text {
				t.Errorf("text %q, want %q", text, tc.text)
			}
			for _, ours := range []float64{0.5, 0.99, 1.01, 1.05, 1.1, 1.2, 1.3, 1.33, 2, 2.9, 3.1, 140, 160} {
				for _, ratio := range []float64{0.1, 0.5, 0.65, 0.7, 0.8, 0.85, 0.9, 0.92, 0.94, 0.96, 1, 1.2, 1.3, 1.9, 2.1, 19, 21, 99, 101} {
					base := ours * ratio // lower is better: ratio = base/ours
					if tc.higherBetter {
						base = ours / ratio
					}
					row := report.Row{Unit: tc.unit, HigherBetter: tc.higherBetter, Ours: report.NewStat(ours), Base: &report.Stat{Median: base, N: 1}}
					row.ComputeRatio()
					got, old, said := tc.goal.Met(row), tc.old(row), textSays(t, text, row)
					if got != old || got != said {
						t.Errorf("ours %v, ratio %v: met %v, the old test %v, the text %q says %v", ours, row.Ratio, got, old, text, said)
					}
				}
			}
		})
	}
}

// textSays judges row by reading a goal's text.
func textSays(t *testing.T, text string, row report.Row) bool {
	ok := true
	for _, part := range strings.Split(text, ", ") {
		m := regexp.MustCompile(`^(>= ([0-9.]+)x|ours (<=|<) ([0-9.]+)( \S+)?)$`).FindStringSubmatch(part)
		if m == nil {
			t.Fatalf("goal text %q: part %q is neither \">= Nx\" nor \"ours <= V\"", text, part)
		}
		if m[2] != "" {
			v, _ := strconv.ParseFloat(m[2], 64)
			ok = ok && row.Ratio >= v
			continue
		}
		v, _ := strconv.ParseFloat(m[4], 64)
		if m[3] == "<" {
			ok = ok && row.Ours.Median < v
		} else {
			ok = ok && row.Ours.Median <= v
		}
	}
	return ok
}

// TestPeerGoalInRatioTerms is issue 37's first complaint: a filestream get
// 3.5 times slower than cuda.core showed "0.29x  <= 0.5x cuda.core
// MISSED", the ratio written baseline/ours and the goal ours/baseline. The
// goal must read in the ratio's terms, ">= Nx", and the verdict follow it.
func TestPeerGoalInRatioTerms(t *testing.T) {
	for _, tc := range []struct {
		ours, peer float64
		met        bool
	}{{127, 36.6, false}, {100, 349, true}} {
		res := &report.Results{Suites: []report.Suite{{Name: "progcache", Rows: []report.Row{
			{Case: "filestream get hit 64 KiB", Unit: "us/op", Ours: report.NewStat(tc.ours)},
		}}}}
		mergePeers(res, []peerRecord{{Peer: "cuda.core", Version: "1.2.0", Case: "filestream_get", Value: tc.peer, Unit: "us/op"}})
		row := res.Suites[0].Rows[0]
		m := regexp.MustCompile(`^>= ([0-9.]+)x`).FindStringSubmatch(row.Goal)
		if m == nil || row.GoalMet == nil {
			t.Fatalf("ours %v us vs %v us: goal %q (met %v): not in the ratio's terms", tc.ours, tc.peer, row.Goal, row.GoalMet)
		}
		min, _ := strconv.ParseFloat(m[1], 64)
		if *row.GoalMet != tc.met || (row.Ratio >= min) != tc.met {
			t.Errorf("ours %v us vs %v us: ratio %s, goal %q, met %v; want met %v", tc.ours, tc.peer, report.FormatRatio(row.Ratio), row.Goal, *row.GoalMet, tc.met)
		}
	}
}

// TestLoadRecorded runs accbench with the load average read from a file:
// a busy machine is recorded in results.json, warned of on stderr and in
// the report, and an idle one is not; a file that is not a load average
// says so instead of a figure.
func TestLoadRecorded(t *testing.T) {
	ok := Suite{Name: "ok", Run: func(env *Env) (Output, error) {
		return Output{Measurements: []Measurement{{Case: "c", Unit: "ns/op", Ours: 10, Base: 100, BaseName: "b", Goal: Goal{MinRatio: 2}}}}, nil
	}}
	for _, tc := range []struct {
		loadavg string
		busy    bool
		want    string
	}{
		{"0.00 0.01 0.05 1/300 4242\n", false, ""},
		{"1000.50 900.00 800.25 9/300 4242\n", true, "1000.50 900.00 800.25"},
		{"not a load average", false, "load average not recorded"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "loadavg")
		if err := os.WriteFile(path, []byte(tc.loadavg), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out")
		var stdout, stderr bytes.Buffer
		if code := run([]string{"-driver", "sim", "-out", out}, &stdout, &stderr, Extra{loadavg: path}, []Suite{ok}); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		f, err := os.Open(filepath.Join(out, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := report.ReadJSON(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		html, _ := os.ReadFile(filepath.Join(out, "report.html"))
		warned := strings.Contains(stderr.String(), "accbench: warning: busy machine")
		if res.Load.Busy != tc.busy || warned != tc.busy || bytes.Contains(html, []byte(`id="busy"`)) != tc.busy {
			t.Errorf("load %q: busy %v, warned on stderr %v, in the report %v; want %v\nstderr: %s", tc.loadavg, res.Load.Busy, warned, !warned, tc.busy, stderr.String())
		}
		if tc.want != "" && (!strings.Contains(stdout.String(), tc.want) || !bytes.Contains(html, []byte(tc.want))) {
			t.Errorf("load %q: the table and the report lack %q:\n%s", tc.loadavg, tc.want, stdout.String())
		}
		if tc.loadavg[0] != 'n' && (res.Load.Start == nil || res.Load.End == nil || res.Load.Start.CPUs == 0 || res.Load.End.GOMAXPROCS == 0) {
			t.Errorf("load %q: start and end not both recorded: %+v", tc.loadavg, res.Load)
		}
	}
}

func FuzzParseLoadavg(f *testing.F) {
	for _, s := range []string{"0.52 0.58 0.59 1/467 12345\n", "0 0 0", "1.0 2.0", "NaN 1 1", "-1 0 0", "1e400 0 0", "", "a b c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l1, l5, l15, err := parseLoadavg(s)
		if err != nil {
			if l1 != 0 || l5 != 0 || l15 != 0 {
				t.Errorf("%q: error %v with figures", s, err)
			}
			return
		}
		for _, v := range []float64{l1, l5, l15} {
			if v < 0 || v > 1e9 || v != v {
				t.Errorf("%q: load %v accepted", s, v)
			}
		}
	})
}
