package accbench

import (
	"strings"
	"testing"

	"github.com/accelkit/accelkit/bench/report"
)

// TestAnchorNeverJudged is issue 41's third item: cuda.core's filestream
// figures stored from an H100 host were the baseline of our rows on any
// machine, and goals were marked met or missed against them. An anchor is
// shown with its machine and date, with no ratio and no verdict; the goal
// against cuda.core is listed as not measurable until -peers measures
// cuda.core in the same run, and then it is judged.
func TestAnchorNeverJudged(t *testing.T) {
	newResults := func() *report.Results {
		var out Output
		out.Measurements = append(out.Measurements, cacheRows("filestream", 100, 20)...)
		out.Measurements = append(out.Measurements, cacheRows("memory", 2, 0.5)...)
		return &report.Results{Schema: report.Schema, Suites: []report.Suite{{Name: "progcache", Rows: aggregate([]Output{out})}}}
	}

	res := newResults()
	for _, c := range []string{"filestream put 64 KiB", "filestream get hit 64 KiB"} {
		row := findRow(res, "progcache", c)
		if row.Base != nil || row.Ratio != 0 || row.GoalMet != nil || row.Goal != "" {
			t.Errorf("%s without a peer: base %v, ratio %v, goal %q %v; want no baseline, ratio or verdict from a stored figure",
				c, row.Base, row.Ratio, row.Goal, row.GoalMet)
		}
		if a := row.Anchor; a == nil || a.Date == "" || !strings.Contains(a.Machine, "H100") {
			t.Errorf("%s: anchor %+v; want cuda.core's stored figure with its machine and date", c, a)
		}
	}
	if row := findRow(res, "progcache", "memory get hit 64 KiB"); row.GoalMet == nil || !*row.GoalMet {
		t.Errorf("memory get: goal %q %v; the goal on our own figure (< 1 us) is still judged", row.Goal, row.GoalMet)
	}
	var unjudged []string
	for _, u := range unmeasuredPeerGoals(res, false) {
		if u.Suite == "progcache" {
			unjudged = append(unjudged, u.Case)
		}
	}
	if strings.Join(unjudged, ",") != "filestream put 64 KiB,filestream get hit 64 KiB" {
		t.Errorf("not measurable without -peers: %q; want both filestream goals against cuda.core", unjudged)
	}
	var tb strings.Builder
	if err := res.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(tb.String(), "\n") {
		if !strings.Contains(line, "filestream get") {
			continue
		}
		if !strings.Contains(line, "(36.6)  anchor 2026-11-23, NVIDIA H100") {
			t.Errorf("table line %q does not show the anchor in parentheses with its date and machine", line)
		}
		if strings.Contains(line, "x ") || strings.Contains(line, "MISSED") || strings.Contains(line, "met") {
			t.Errorf("table line %q gives a ratio or a verdict against the anchor", line)
		}
	}
	var html strings.Builder
	if err := res.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "2026-11-23; not this run, not judged") {
		t.Errorf("report.html does not name the anchor's date and that it is not judged")
	}

	// With -peers, cuda.core measured in this run is the baseline, judged.
	res = newResults()
	mergePeers(res, []peerRecord{{Peer: "cuda.core", Version: "1.2.0", Case: "filestream_get", Value: 50, Unit: "us/op"}})
	row := findRow(res, "progcache", "filestream get hit 64 KiB")
	if row.Base == nil || row.Base.Median != 50 || row.Ratio != 2.5 || row.GoalMet == nil || !*row.GoalMet {
		t.Errorf("filestream get beside cuda.core in the run: %+v; want base 50, ratio 2.5, goal >= 2x met", row)
	}
	for _, u := range unmeasuredPeerGoals(res, true) {
		if u.Case == "filestream get hit 64 KiB" {
			t.Errorf("judged against a peer of this run, yet listed as not measurable: %+v", u)
		}
	}
}
