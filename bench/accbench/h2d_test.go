package accbench

import (
	"strings"
	"testing"

	"github.com/accelkit/accelkit/bench/report"
)

// TestH2DSidesRotate: every side runs once per repetition, the first side
// changing each repetition, so no side always runs right after another.
func TestH2DSidesRotate(t *testing.T) {
	var order strings.Builder
	side := func(name string) h2dSide {
		return h2dSide{name: name, copy: func() error { order.WriteString(name); return nil }}
	}
	sides := []h2dSide{side("a"), side("b"), side("c")}
	if err := runH2DSides(sides, 1<<20, 3); err != nil {
		t.Fatal(err)
	}
	if got := order.String(); got != "abc"+"abc"+"bca"+"cab" { // the untimed warm-up, then 3 rotations
		t.Errorf("order %q", got)
	}
	for _, s := range sides {
		if len(s.gbps) != 3 {
			t.Errorf("side %s: %d figures, want 3", s.name, len(s.gbps))
		}
	}
}

// TestH2DGoalsOnAGPUOnly: on the sim the h2d rows from 16 MiB carry no
// goal, and the verdict lists the GPU's goals as not measurable here.
func TestH2DGoalsOnAGPUOnly(t *testing.T) {
	res := &report.Results{Simulated: true, Suites: []report.Suite{{Name: "h2d", Rows: []report.Row{
		{Case: "H2D 4 MiB (p50)", Unit: "GB/s", BaseName: "driver pageable"},
		{Case: "H2D 16 MiB (p50)", Unit: "GB/s", BaseName: "driver pageable"},
		{Case: "H2D 16 MiB staged vs memmove (p50)", Unit: "GB/s", BaseName: "best memmove, 1 goroutine"},
		{Case: "H2D 16 MiB registered (p50)", Unit: "GB/s", BaseName: "driver pinned"},
	}}}}
	var got []string
	for _, u := range unmeasuredH2DGoals(res) {
		got = append(got, u.Case+": "+u.Goal)
	}
	want := "H2D 16 MiB (p50): >= 4x driver pageable; H2D 16 MiB registered (p50): >= 0.9x driver pinned"
	if strings.Join(got, "; ") != want {
		t.Errorf("unmeasured %q, want %q", got, want)
	}
	res.Simulated = false
	if u := unmeasuredH2DGoals(res); len(u) != 0 {
		t.Errorf("off the sim: %v; the rows carry their goals there", u)
	}
}
