package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// TableWidth is the widest line WriteTable prints: the table reads in a
// 120-column terminal. Longer cells are cut (with "…") only when the
// columns cannot fit otherwise; report.html and results.json keep them
// whole.
const TableWidth = 120

// Narrowest the case and baseline-name columns are cut to before the
// goal column is.
const (
	minCaseW = 24
	minVsW   = 12
	minGoalW = 18 // ">= 0.8333x MISSED"
)

// WriteTable prints the summary table: a header (device, host, load), the
// ratio legend, per suite one line per figure, and last the verdict: goals
// met, missed, and not measurable here with the reason. Figures that are 0
// with nothing to compare them to (no retries, no OOMs) are counted, not
// listed.
func (r *Results) WriteTable(w io.Writer) error {
	var b strings.Builder
	say := func(text string) { b.WriteString(wrap(text, TableWidth, "  ")) }
	say(fmt.Sprintf("accbench on %s, driver %s", r.Device, r.Driver))
	if r.Simulated {
		say("simulated: device figures are the sim's (the OS's mmap and memcpy), not a GPU's")
	}
	busy := ""
	if r.Load.Busy {
		busy = ": BUSY"
	}
	say(fmt.Sprintf("host: %s/%s, %d CPUs, GOMAXPROCS %d, %s", r.Host.OS, r.Host.Arch, r.Host.CPUs, r.Host.GOMAXPROCS, r.Host.CPUModel))
	say(r.Load.Summary() + busy)
	say(RatioLegend)
	b.WriteString("\n")

	t := &table{}
	t.add(tableLine{cells: [7]string{"case", "unit", "ours", "base", "baseline", "ratio", "goal"}})
	for _, s := range r.Suites {
		t.add(tableLine{text: s.Name})
		switch {
		case s.Error != "":
			t.add(tableLine{text: "  FAILED: " + firstLine(s.Error)})
			continue
		case s.Skipped != "":
			t.add(tableLine{text: "  SKIPPED: " + firstLine(s.Skipped)})
			continue
		}
		quiet, lastSkip := 0, ""
		for _, row := range s.Rows {
			if row.Skipped != "" {
				why := ": SKIPPED: " + firstLine(row.Skipped)
				if row.Skipped == lastSkip {
					why = ": SKIPPED, as above"
				}
				t.add(tableLine{text: "  " + row.Case + why})
				lastSkip = row.Skipped
				continue
			}
			if row.Ours.Median == 0 && row.Base == nil && row.Goal == "" {
				quiet++
				continue
			}
			t.add(tableLine{cells: rowCells(row)})
		}
		if quiet > 0 {
			t.add(tableLine{text: fmt.Sprintf("  (%d more figures are 0 with no baseline or goal, e.g. retries and OOMs: see the report)", quiet)})
		}
	}
	t.write(&b)
	b.WriteString("\n")
	r.writeVerdict(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

func rowCells(row Row) [7]string {
	ours := FormatNumber(row.Ours.Median)
	if row.Ours.N > 1 {
		ours += fmt.Sprintf(" ±%.0f%%", 50*row.Ours.Spread())
	}
	base, vs, ratio := "", "", ""
	switch a := row.Anchor; {
	case row.Base != nil:
		base, vs = FormatNumber(row.Base.Median), row.BaseName
	case a != nil: // in parentheses and with no ratio: not this run's figure
		base, vs = "("+FormatNumber(a.Value)+")", "anchor "+a.Date+", "+a.Machine
	}
	if row.Ratio > 0 {
		ratio = FormatRatio(row.Ratio)
	}
	return [7]string{"  " + row.Case, row.Unit, ours, base, vs, ratio, row.Goal + verdictWord(row.GoalMet)}
}

func verdictWord(met *bool) string {
	switch {
	case met == nil:
		return ""
	case *met:
		return " met"
	}
	return " MISSED"
}

// verdictText is the verdict: a headline (goals met, missed, not
// measurable) and one line per goal missed or not measurable, per suite
// failed or skipped, per case skipped, and the busy-machine warning.
type verdictText struct {
	Head  string
	Lines []string
}

func (r *Results) verdict() verdictText {
	met, missed := 0, 0
	var lines []string
	for _, s := range r.Suites {
		for _, row := range s.Rows {
			if row.GoalMet == nil {
				continue
			}
			if *row.GoalMet {
				met++
				continue
			}
			missed++
			got := "ours " + FormatValue(row.Ours.Median, row.Unit)
			if row.Ratio > 0 {
				got += ", ratio " + FormatRatio(row.Ratio) + " vs " + row.BaseName
			}
			lines = append(lines, fmt.Sprintf("MISSED %s / %s: %s; goal %s", s.Name, row.Case, got, row.Goal))
		}
	}
	// One line per reason: the goals a missing peer leaves unjudged.
	var reasons []string
	byReason := map[string][]string{}
	for _, u := range r.Unmeasured {
		if _, ok := byReason[u.Reason]; !ok {
			reasons = append(reasons, u.Reason)
		}
		byReason[u.Reason] = append(byReason[u.Reason], fmt.Sprintf("%s / %s (%s)", u.Suite, u.Case, u.Goal))
	}
	for _, why := range reasons {
		lines = append(lines, fmt.Sprintf("not measurable here, %s: %s", why, strings.Join(byReason[why], "; ")))
	}
	// One line per reason: the cases skipped while their suites ran.
	skippedCases := 0
	reasons, byReason = nil, map[string][]string{}
	for _, s := range r.Suites {
		for _, row := range s.Rows {
			if why := firstLine(row.Skipped); why != "" {
				skippedCases++
				if _, ok := byReason[why]; !ok {
					reasons = append(reasons, why)
				}
				byReason[why] = append(byReason[why], s.Name+" / "+row.Case)
			}
		}
	}
	for _, why := range reasons {
		lines = append(lines, fmt.Sprintf("not measurable here: %s and their goals: %s", strings.Join(byReason[why], "; "), why))
	}
	failed, skipped := 0, 0
	for _, s := range r.Suites {
		switch {
		case s.Error != "":
			failed++
			lines = append(lines, fmt.Sprintf("FAILED suite %s: %s", s.Name, firstLine(s.Error)))
		case s.Skipped != "":
			skipped++
			lines = append(lines, fmt.Sprintf("not measurable here: suite %s and its goals: %s", s.Name, firstLine(s.Skipped)))
		}
	}
	head := fmt.Sprintf("verdict: %d goals met, %d missed, %d not measurable here", met, missed, len(r.Unmeasured))
	switch {
	case skipped > 0 && skippedCases > 0:
		head += fmt.Sprintf(" (and suites skipped: %d, cases skipped: %d)", skipped, skippedCases)
	case skipped > 0:
		head += fmt.Sprintf(" (and suites skipped: %d)", skipped)
	case skippedCases > 0:
		head += fmt.Sprintf(" (and cases skipped: %d)", skippedCases)
	}
	if failed > 0 {
		head += fmt.Sprintf("; %d suites failed", failed)
	}
	if warn := r.Load.BusyWarning(); warn != "" {
		lines = append(lines, "WARNING: "+warn)
	}
	return verdictText{Head: head, Lines: lines}
}

// writeVerdict prints the verdict, the block that ends the table.
func (r *Results) writeVerdict(b *strings.Builder) {
	v := r.verdict()
	b.WriteString(wrap(v.Head, TableWidth, "  "))
	for _, l := range v.Lines {
		b.WriteString(wrap("  "+l, TableWidth, "      "))
	}
}

// tableLine is a row of cells, or a line of text (a suite's name, a
// skipped suite or case) printed as it is.
type tableLine struct {
	cells [7]string
	text  string
}

// table lays out the figures in columns: case and unit left-aligned, the
// numbers right-aligned, the baseline's name left-aligned, and the goal
// last, unpadded.
type table struct{ lines []tableLine }

func (t *table) add(l tableLine) { t.lines = append(t.lines, l) }

var rightAligned = [7]bool{2: true, 3: true, 5: true}

func (t *table) write(b *strings.Builder) {
	const gap = 2
	var w [7]int
	for _, l := range t.lines {
		if l.text != "" {
			continue
		}
		for i, c := range l.cells {
			w[i] = max(w[i], utf8.RuneCountInString(c))
		}
	}
	// Fit TableWidth: a long goal wraps onto more lines under its
	// column; past minGoalW, the baseline's name and then the case are cut.
	prefix := func() int {
		n := 0
		for _, x := range w[:6] {
			n += x + gap
		}
		return n
	}
	for prefix()+min(w[6], minGoalW) > TableWidth {
		switch {
		case w[4] > minVsW:
			w[4]--
		case w[0] > minCaseW:
			w[0]--
		default:
			w[6] = TableWidth - prefix() // a terminal narrower than any table
		}
	}
	w[6] = min(w[6], TableWidth-prefix())
	for _, l := range t.lines {
		if l.text != "" {
			b.WriteString(wrap(l.text, TableWidth, "    "))
			continue
		}
		var line strings.Builder
		for i, c := range l.cells[:6] {
			c = clip(c, w[i])
			pad := strings.Repeat(" ", w[i]-utf8.RuneCountInString(c))
			if rightAligned[i] {
				line.WriteString(pad + c + "  ")
			} else {
				line.WriteString(c + pad + "  ")
			}
		}
		goal := strings.Split(strings.TrimSuffix(wrap(l.cells[6], max(w[6], 1), ""), "\n"), "\n")
		b.WriteString(strings.TrimRight(line.String()+goal[0], " ") + "\n")
		for _, g := range goal[1:] {
			b.WriteString(strings.Repeat(" ", prefix()) + g + "\n")
		}
	}
}

// wrap breaks text into lines of at most width runes at spaces, the lines
// after the first indented; a word longer than a line is cut. Each line
// ends in a newline.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	line := ""
	flush := func() {
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		line = indent
	}
	for i, word := range strings.Split(text, " ") {
		switch {
		case i == 0:
			line = word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
			line += " " + word
		default:
			flush()
			line += word
		}
		for utf8.RuneCountInString(line) > width {
			r := []rune(line)
			b.WriteString(string(r[:width]) + "\n")
			line = indent + string(r[width:])
		}
	}
	flush()
	return b.String()
}

// clip cuts s to n runes, the last one "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
