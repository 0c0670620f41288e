package accbench

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestAlternateSwapsSides is issue 41's second item: the wrlru rows timed
// wrlru's whole run and then golang-lru's, so load that came or went
// between them fell on one side. alternateRounds runs both in every round and
// swaps which goes first, and keeps each side's own figures.
func TestAlternateSwapsSides(t *testing.T) {
	var order strings.Builder
	side := func(name string, v float64) func() (float64, error) {
		return func() (float64, error) { order.WriteString(name); v++; return v, nil }
	}
	o, b, err := alternateRounds(4, side("o", 10), side("b", 20))
	if err != nil {
		t.Fatal(err)
	}
	if got := order.String(); got != "obboobbo" {
		t.Errorf("order %q, want obboobbo: every round both sides, the first swapping", got)
	}
	if want := []float64{11, 12, 13, 14}; !equalFloats(o, want) {
		t.Errorf("ours %v, want %v", o, want)
	}
	if want := []float64{21, 22, 23, 24}; !equalFloats(b, want) {
		t.Errorf("base %v, want %v", b, want)
	}
	boom := errors.New("boom")
	if _, _, err := alternateRounds(3, side("o", 0), func() (float64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("err %v, want the side's error", err)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWrlruSuiteQuick runs the suite: both rows beside golang-lru/v2, and
// notes giving each side's rounds with their spread.
func TestWrlruSuiteQuick(t *testing.T) {
	out, err := wrlruSuite().Run(&Env{Ctx: context.Background(), Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	rows := aggregate([]Output{out})
	if len(rows) != 2 {
		t.Fatalf("%d rows, want latency and throughput", len(rows))
	}
	for _, r := range rows {
		if r.Base == nil || r.BaseName != "golang-lru/v2" || r.Ratio <= 0 || r.Ours.Median <= 0 {
			t.Errorf("row %+v: want ours beside golang-lru/v2 with a ratio", r)
		}
	}
	notes := strings.Join(out.Notes, "\n")
	for _, want := range []string{"hit latency, 7 alternating rounds", "hit throughput, 7 alternating rounds", "spread"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}
