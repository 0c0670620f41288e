// Package report holds accbench's results: the data model written to
// results.json, the summary table printed to the terminal, and the
// self-contained HTML report (inline SVG, no scripts, nothing fetched).
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Schema versions results.json; readers reject other versions.
const Schema = 1

// Results is one accbench run.
type Results struct {
	Schema    int       `json:"schema"`
	Started   time.Time `json:"started"`
	Seconds   float64   `json:"seconds"`
	Command   string    `json:"command"`
	Host      Host      `json:"host"`
	Driver    string    `json:"driver"`
	Device    string    `json:"device"`
	Simulated bool      `json:"simulated"` // figures come from the sim device, not a GPU
	Quick     bool      `json:"quick"`
	Count     int       `json:"count"`
	// Load is how busy the machine was at the start and end of the run.
	Load Load `json:"load"`
	// RatioLegend says which way every ratio points (the constant
	// RatioLegend), so that a reader of results.json need not look it up.
	RatioLegend string  `json:"ratio_legend"`
	Suites      []Suite `json:"suites"`
	// Unmeasured lists goals this run could not judge, with the reason
	// (a peer that did not run, a suite skipped on this machine).
	Unmeasured []Unmeasured `json:"unmeasured,omitempty"`
}

// RatioLegend is the one direction of every ratio accbench prints:
// stdout, results.json and report.html.
const RatioLegend = "ratio: times better than the baseline (baseline/ours for times, ours/baseline for rates): " +
	"> 1x ours wins; goal >= Nx"

// Unmeasured is a goal the run could not judge.
type Unmeasured struct {
	Suite  string `json:"suite"`
	Case   string `json:"case"`
	Goal   string `json:"goal"`
	Reason string `json:"reason"`
}

// BusyLoadPerCPU defines a busy machine: a 1-minute load average above
// this many runnable threads per CPU, at the start or the end of the run.
// Above it the suites share the CPUs with other work, timed figures move
// by tens of percent between runs, and a goal near its threshold can flip.
const BusyLoadPerCPU = 0.5

// Load records the machine's load average at the start and the end of
// the run.
type Load struct {
	Start *LoadSample `json:"start,omitempty"`
	End   *LoadSample `json:"end,omitempty"`
	// Unavailable says why there are no load averages (they are read
	// from /proc/loadavg, which only Linux has).
	Unavailable string `json:"unavailable,omitempty"`
	// Busy: Start or End is above BusyLoadPerCPU; BusyRule states the rule.
	Busy     bool   `json:"busy"`
	BusyRule string `json:"busy_rule"`
}

// LoadSample is the load average and the CPUs at one moment.
type LoadSample struct {
	Load1      float64 `json:"load1"`
	Load5      float64 `json:"load5"`
	Load15     float64 `json:"load15"`
	CPUs       int     `json:"cpus"` // runtime.NumCPU
	GOMAXPROCS int     `json:"gomaxprocs"`
}

// BusyRule is Load.BusyRule's text.
var BusyRule = fmt.Sprintf("busy: 1-minute load above %.1f x CPUs at start or end", BusyLoadPerCPU)

// Busy says whether s is above BusyLoadPerCPU.
func (s *LoadSample) Busy() bool {
	return s != nil && s.CPUs > 0 && s.Load1 > BusyLoadPerCPU*float64(s.CPUs)
}

// String is the three load averages and the CPU count.
func (s *LoadSample) String() string {
	return fmt.Sprintf("%.2f %.2f %.2f on %d CPUs", s.Load1, s.Load5, s.Load15, s.CPUs)
}

// Judge sets l.Busy and l.BusyRule from the samples.
func (l *Load) Judge() {
	l.Busy = l.Start.Busy() || l.End.Busy()
	l.BusyRule = BusyRule
}

// Summary is l in a few words: the load averages at start and end, or
// why there are none.
func (l Load) Summary() string {
	switch {
	case l.Unavailable != "":
		return "load average not recorded (" + l.Unavailable + ")"
	case l.Start == nil:
		return "load average not recorded"
	}
	s := fmt.Sprintf("load %.2f %.2f %.2f at start", l.Start.Load1, l.Start.Load5, l.Start.Load15)
	if l.End != nil {
		s += fmt.Sprintf(", %.2f %.2f %.2f at end", l.End.Load1, l.End.Load5, l.End.Load15)
	}
	return s + " (1, 5, 15 min)"
}

// BusyWarning is the warning a busy run carries ("" when not busy).
func (l Load) BusyWarning() string {
	if !l.Busy {
		return ""
	}
	return fmt.Sprintf("busy machine (%s; %s): timed figures move and verdicts near a goal can flip between runs; "+
		"rerun with -count 5 on an idle machine before trusting one", l.Summary(), BusyRule)
}

// Host describes the machine the run measured.
type Host struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model"`
	MemoryGiB  int    `json:"memory_gib"`
	GoVersion  string `json:"go_version"`
}

// Suite is one suite's figures.
type Suite struct {
	Name   string   `json:"name"`
	Title  string   `json:"title"`
	Rows   []Row    `json:"rows"`
	Series []Series `json:"series,omitempty"`
	Notes  []string `json:"notes,omitempty"`
	Error  string   `json:"error,omitempty"`
	// Skipped says why the suite did not run on this machine (a program
	// it needs is not installed, and how to install it): no rows, and not
	// a failure.
	Skipped string  `json:"skipped,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Row is one case: our figure beside its baseline, measured in the same run.
type Row struct {
	Case     string `json:"case"`
	Unit     string `json:"unit"`
	Ours     Stat   `json:"ours"`
	BaseName string `json:"base_name,omitempty"`
	Base     *Stat  `json:"base,omitempty"`
	// HigherBetter says which way the unit points (GB/s up, ns/op down).
	HigherBetter bool `json:"higher_better"`
	// Ratio is how many times better ours is than the baseline, the one
	// direction of RatioLegend: baseline/ours where lower is better (time,
	// counts), ours/baseline where higher is better (throughput). Above 1
	// ours wins. 0 without a baseline.
	Ratio float64 `json:"ratio,omitempty"`
	// Goal states the target in the ratio's own terms (">= 20x": at least
	// 20 times better than the baseline) or on our figure ("ours < 1
	// us/op"); GoalMet says whether this run met it (nil: no goal).
	Goal    string `json:"goal,omitempty"`
	GoalMet *bool  `json:"goal_met,omitempty"`
	Peer    bool   `json:"peer,omitempty"` // the baseline came from a peer harness (bench/peers)
	// Anchor is the baseline's figure stored from another machine, shown
	// for scale: it gives no ratio and no goal is judged against it.
	Anchor *Anchor `json:"anchor,omitempty"`
	// Skipped says why this case did not run on this machine while the
	// rest of its suite did (a library it needs is missing, and how to
	// get it): no figures, and not a failure.
	Skipped string `json:"skipped,omitempty"`
}

// Anchor is a figure of a baseline measured on another machine at
// another time (ANCHORS.md's), not in this run: a machine's speed is in
// it, so it is shown with that machine and date and never judged against.
type Anchor struct {
	Name    string  `json:"name"`    // what was measured, e.g. "cuda.core 1.2.0"
	Value   float64 `json:"value"`   // in the row's unit
	Machine string  `json:"machine"` // where
	Date    string  `json:"date"`    // when, YYYY-MM-DD
}

// String is the anchor in words: "anchor: cuda.core 1.2.0 36.6 us/op on
// MACHINE, DATE; not this run, not judged" (unit is the row's).
func (a Anchor) String(unit string) string {
	return fmt.Sprintf("anchor: %s %s on %s, %s; not this run, not judged", a.Name, FormatValue(a.Value, unit), a.Machine, a.Date)
}

// Stat summarises repeated measurements of one figure.
type Stat struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	N      int       `json:"n"`
	Values []float64 `json:"values,omitempty"`
}

// NewStat summarises values (at least one).
func NewStat(values ...float64) Stat {
	v := slices.Clone(values)
	slices.Sort(v)
	s := Stat{Min: v[0], Max: v[len(v)-1], N: len(v), Values: values}
	if n := len(v); n%2 == 1 {
		s.Median = v[n/2]
	} else {
		s.Median = (v[n/2-1] + v[n/2]) / 2
	}
	return s
}

// Spread is (max-min)/median, the relative range over repetitions.
func (s Stat) Spread() float64 {
	if s.Median == 0 {
		return 0
	}
	return (s.Max - s.Min) / math.Abs(s.Median)
}

// Series is a line chart: several lines over one x axis.
type Series struct {
	Name   string `json:"name"`
	XLabel string `json:"x_label"`
	YLabel string `json:"y_label"`
	LogX   bool   `json:"log_x"`
	Lines  []Line `json:"lines"`
}

// Line is one labelled line of a Series.
type Line struct {
	Label  string       `json:"label"`
	Points [][2]float64 `json:"points"`
}

// ComputeRatio fills r.Ratio. When ours and the baseline were measured
// in the same repetitions (as many values on each side, in repetition
// order, as accbench records them) it is the median of the repetitions'
// own ratios: each pair saw the same machine, and a repetition the load
// slowed on one side moves its own ratio, not the other side's median,
// as cachetest.Versus takes the median of its rounds' ratios. Otherwise
// (a peer's single figure, say) it is the ratio of the medians.
func (r *Row) ComputeRatio() {
	if r.Base == nil || r.Base.Median == 0 || r.Ours.Median == 0 {
		r.Ratio = 0
		return
	}
	better := func(ours, base float64) float64 {
		if r.HigherBetter {
			return ours / base
		}
		return base / ours
	}
	o, b := r.Ours.Values, r.Base.Values
	if len(o) > 1 && len(o) == len(b) {
		ratios := make([]float64, 0, len(o))
		for i := range o {
			if o[i] > 0 && b[i] > 0 {
				ratios = append(ratios, better(o[i], b[i]))
			}
		}
		if len(ratios) == len(o) {
			r.Ratio = NewStat(ratios...).Median
			return
		}
	}
	r.Ratio = better(r.Ours.Median, r.Base.Median)
}

// WriteJSON writes r indented.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads results written by WriteJSON, rejecting other schemas.
func ReadJSON(rd io.Reader) (*Results, error) {
	var r Results
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("results.json: %w", err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("results.json: schema %d, this accbench reads schema %d", r.Schema, Schema)
	}
	return &r, nil
}

// FormatValue prints v compactly with its unit.
func FormatValue(v float64, unit string) string {
	return FormatNumber(v) + " " + unit
}

// FormatNumber prints v compactly: three significant digits, or the
// integer part of larger values.
func FormatNumber(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// FormatRatio prints a ratio as "12.3x".
func FormatRatio(x float64) string {
	switch {
	case x == 0:
		return "-"
	case x >= 100:
		return fmt.Sprintf("%.0fx", x)
	case x >= 10:
		return fmt.Sprintf("%.1fx", x)
	case x >= 1:
		return fmt.Sprintf("%.2fx", x)
	case x >= 0.1:
		return fmt.Sprintf("%.3fx", x) // three digits, to compare with a goal such as ">= 0.9091x"
	}
	return fmt.Sprintf("%.3gx", x)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
