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
	"text/tabwriter"
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
	Suites    []Suite   `json:"suites"`
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
	// Ratio is how many times better ours is than the baseline: > 1 means
	// ours wins, whatever the unit's direction. 0 without a baseline.
	Ratio float64 `json:"ratio,omitempty"`
	// Goal states the target, e.g. ">= 20x" or "<= 1.10"; GoalMet says
	// whether this run met it (nil: no goal).
	Goal    string `json:"goal,omitempty"`
	GoalMet *bool  `json:"goal_met,omitempty"`
	Peer    bool   `json:"peer,omitempty"` // the baseline came from a peer harness (bench/peers)
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

// ComputeRatio fills r.Ratio from the medians.
func (r *Row) ComputeRatio() {
	if r.Base == nil || r.Base.Median == 0 || r.Ours.Median == 0 {
		r.Ratio = 0
		return
	}
	if r.HigherBetter {
		r.Ratio = r.Ours.Median / r.Base.Median
	} else {
		r.Ratio = r.Base.Median / r.Ours.Median
	}
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
	switch {
	case v == 0:
		return "0 " + unit
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
	return fmt.Sprintf("%.3g %s", v, unit)
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
	}
	return fmt.Sprintf("%.2fx", x)
}

// WriteTable prints the summary table: one line per case.
func (r *Results) WriteTable(w io.Writer) error {
	sim := ""
	if r.Simulated {
		sim = " (simulated: device figures are the sim's, not a GPU's)"
	}
	fmt.Fprintf(w, "accbench on %s, driver %s%s; %s/%s, %d CPUs, %s\n",
		r.Device, r.Driver, sim, r.Host.OS, r.Host.Arch, r.Host.CPUs, r.Host.CPUModel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "suite\tcase\tours\tbaseline\tratio\tgoal\t")
	for _, s := range r.Suites {
		if s.Error != "" {
			fmt.Fprintf(tw, "%s\tFAILED: %s\t\t\t\t\t\n", s.Name, clip(firstLine(s.Error), 90))
			continue
		}
		if s.Skipped != "" {
			fmt.Fprintf(tw, "%s\tSKIPPED: %s\t\t\t\t\t\n", s.Name, firstLine(s.Skipped))
			continue
		}
		for _, row := range s.Rows {
			ours := FormatValue(row.Ours.Median, row.Unit)
			if row.Ours.N > 1 {
				ours += fmt.Sprintf(" ±%.0f%%", 50*row.Ours.Spread())
			}
			base := "-"
			if row.Base != nil {
				base = FormatValue(row.Base.Median, row.Unit) + " " + row.BaseName
			}
			goal := row.Goal
			if row.GoalMet != nil {
				if *row.GoalMet {
					goal += " ok"
				} else {
					goal += " MISSED"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Name, row.Case, ours, base, FormatRatio(row.Ratio), goal)
		}
	}
	return tw.Flush()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
