package report

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"strings"
)

// WriteHTML writes the report as one self-contained HTML page: the machine
// and device, then per suite a bar chart of ratios (log scale, 1x marked),
// line charts of its series, and the raw numbers. It loads nothing from
// elsewhere and runs no script.
func (r *Results) WriteHTML(w io.Writer) error {
	return page.Execute(w, r)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"bars":    func(s Suite) template.HTML { return template.HTML(barChart(s)) },
	"lines":   func(s Series) template.HTML { return template.HTML(lineChart(s)) },
	"value":   FormatValue,
	"ratio":   FormatRatio,
	"spread":  func(s Stat) string { return fmt.Sprintf("%.0f%%", 100*s.Spread()) },
	"deref":   func(b *bool) bool { return *b },
	"verdict": func(r *Results) verdictText { return r.verdict() },
	"hasRatios": func(s Suite) bool {
		for _, r := range s.Rows {
			if r.Ratio > 0 {
				return true
			}
		}
		return false
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>accbench report: {{.Device}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .7em;border-bottom:1px solid #eee;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}.miss{color:#b00}.ok{color:#070}
.sim{background:#fff3cd;padding:.5em 1em;border:1px solid #e0c060}.err{color:#b00;white-space:pre-wrap}.skip{color:#666}
svg{display:block;margin:.5em 0}svg text{font:12px system-ui,sans-serif}
</style></head><body>
<h1>accbench report</h1>
<table>
<tr><th>device</th><td>{{.Device}}</td></tr>
<tr><th>driver</th><td>{{.Driver}}</td></tr>
<tr><th>host</th><td>{{.Host.OS}}/{{.Host.Arch}}, {{.Host.CPUs}} CPUs ({{.Host.CPUModel}}), {{.Host.MemoryGiB}} GiB, GOMAXPROCS {{.Host.GOMAXPROCS}}, {{.Host.GoVersion}}</td></tr>
<tr><th>load</th><td>{{.Load.Summary}}{{if .Load.Busy}} <strong class="miss">(busy)</strong>{{end}}</td></tr>
<tr><th>run</th><td>{{.Started.Format "2006-01-02 15:04:05 MST"}}, {{printf "%.1f" .Seconds}} s, count {{.Count}}{{if .Quick}}, quick{{end}}</td></tr>
<tr><th>command</th><td><code>{{.Command}}</code></td></tr>
</table>
{{with .Load.BusyWarning}}<p class="sim" id="busy">Warning: {{.}}</p>{{end}}
<p id="legend">{{.RatioLegend}}</p>
{{with verdict .}}<section id="verdict"><h2>Verdict</h2><p>{{.Head}}</p>{{if .Lines}}<ul>{{range .Lines}}<li>{{.}}</li>{{end}}</ul>{{end}}</section>{{end}}
{{if .Simulated}}<p class="sim">Simulated device: absolute device figures are the sim's (memory mapped by the OS), not a GPU's. Ratios show allocator and pipeline overhead only.</p>{{end}}
{{range .Suites}}
<section id="suite-{{.Name}}" class="suite">
<h2>{{.Name}}: {{.Title}}</h2>
{{if .Error}}<p class="err">{{.Error}}</p>{{else if .Skipped}}<p class="skip">Skipped: {{.Skipped}}</p>{{else}}
{{if hasRatios .}}{{bars .}}{{end}}
{{range .Series}}{{lines .}}{{end}}
<table>
<tr><th>case</th><th>ours (median)</th><th>spread</th><th>baseline</th><th>ratio</th><th>goal</th></tr>
{{range .Rows}}{{if .Skipped}}<tr><td>{{.Case}}</td><td class="skip" colspan="5">Skipped: {{.Skipped}}</td></tr>
{{else}}<tr><td>{{.Case}}</td><td class="n">{{value .Ours.Median .Unit}}</td><td class="n">{{if gt .Ours.N 1}}{{spread .Ours}}{{end}}</td>
<td class="n">{{if .Base}}{{value .Base.Median .Unit}} {{.BaseName}}{{else if .Anchor}}<span class="skip">{{.Anchor.String .Unit}}</span>{{else}}-{{end}}</td><td class="n">{{ratio .Ratio}}</td>
<td>{{.Goal}}{{if .GoalMet}}{{if deref .GoalMet}} <span class="ok">met</span>{{else}} <span class="miss">missed</span>{{end}}{{end}}</td></tr>
{{end}}{{end}}</table>
{{range .Notes}}<p>{{.}}</p>{{end}}
<p>{{printf "%.1f" .Seconds}} s</p>
{{end}}
</section>
{{end}}
</body></html>
`))

const (
	chartW     = 760
	barH       = 22
	labelW     = 320 // the bar chart's label column
	plotW      = chartW - labelW - 60
	lineChartH = 280
	textLineH  = 14 // one line of 12px text
	// Labels wrap at word boundaries rather than being cut: the part that
	// tells two rows apart may come last ("..., plain" / "..., expandable").
	// Widths are in characters of 12px text, about 7px each at most for
	// the text the report has; the Chromium test measures the real widths.
	labelChars  = 42
	legendChars = 19
)

// barChart draws one horizontal bar per row with a ratio, on a log scale
// from 0.1x to the largest ratio, with the 1x line marked: a bar right of it
// is ours winning. A long label wraps onto more lines.
func barChart(s Suite) string {
	var rows []Row
	for _, r := range s.Rows {
		if r.Ratio > 0 {
			rows = append(rows, r)
		}
	}
	maxR := 10.0
	for _, r := range rows {
		maxR = math.Max(maxR, r.Ratio)
	}
	lo, hi := math.Log10(0.1), math.Log10(maxR*1.2)
	x := func(v float64) float64 {
		v = math.Max(v, 0.1)
		return labelW + (math.Log10(v)-lo)/(hi-lo)*plotW
	}
	labels := make([][]string, len(rows))
	heights := make([]int, len(rows))
	h := 46
	for i, r := range rows {
		labels[i] = wrapWords(r.Case, labelChars)
		heights[i] = max(barH, len(labels[i])*textLineH+8)
		h += heights[i]
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s ratios">`, chartW, h, html.EscapeString(s.Name))
	fmt.Fprintf(&b, `<text x="%d" y="14">ratio: times better than the baseline (log scale; right of 1x: ours better)</text>`, labelW-120)
	y := 24
	for i, r := range rows {
		color := "#3a7bd5"
		if r.Ratio < 1 {
			color = "#d55a3a"
		}
		mid := y + heights[i]/2 // the bar and its label are centred on the row
		ty := mid + 4 - (len(labels[i])-1)*textLineH/2
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">`, labelW-6, ty)
		for j, l := range labels[i] {
			dy := 0
			if j > 0 {
				dy = textLineH
			}
			fmt.Fprintf(&b, `<tspan x="%d" dy="%d">%s</tspan>`, labelW-6, dy, html.EscapeString(l))
		}
		b.WriteString(`</text>`)
		x0, x1 := x(1), x(r.Ratio)
		if x1 < x0 {
			x0, x1 = x1, x0
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`, x0, mid-(barH-6)/2, math.Max(x1-x0, 1), barH-6, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`, math.Max(x(r.Ratio), x(1))+4, mid+4, FormatRatio(r.Ratio))
		y += heights[i]
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="18" x2="%.1f" y2="%d" stroke="#333" stroke-dasharray="3,3"/>`, x(1), x(1), h-20)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">1x</text>`, x(1), h-6)
	b.WriteString(`</svg>`)
	return b.String()
}

// wrapWords breaks s at spaces into lines of at most n characters; a
// word longer than n stays whole on its own line.
func wrapWords(s string, n int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case len([]rune(line))+1+len([]rune(w)) <= n:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

var palette = []string{"#3a7bd5", "#d55a3a", "#2a9d5b", "#8e44ad", "#c49a00", "#555"}

// lineChart draws a Series with axes, ticks and a legend.
func lineChart(s Series) string {
	const left, right, top, bottom = 70.0, 170.0, 24.0, 40.0
	W, H := float64(chartW), float64(lineChartH)
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	for _, l := range s.Lines {
		for _, p := range l.Points {
			minX, maxX, maxY = math.Min(minX, p[0]), math.Max(maxX, p[0]), math.Max(maxY, p[1])
		}
	}
	if math.IsInf(minX, 0) || maxY == 0 {
		return ""
	}
	tx := func(v float64) float64 { return v }
	if s.LogX && minX > 0 {
		tx = math.Log2
	}
	x0, x1 := tx(minX), tx(maxX)
	if x1 == x0 {
		x1 = x0 + 1
	}
	px := func(v float64) float64 { return left + (tx(v)-x0)/(x1-x0)*(W-left-right) }
	py := func(v float64) float64 { return H - bottom - v/(maxY*1.1)*(H-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">`, chartW, lineChartH, html.EscapeString(s.Name))
	fmt.Fprintf(&b, `<text x="%.0f" y="14">%s</text>`, left, html.EscapeString(s.Name))
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#333"/>`, left, H-bottom, W-right, H-bottom)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#333"/>`, left, top, left, H-bottom)
	for i := 0; i <= 4; i++ {
		v := maxY * 1.1 * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`, left-4, py(v)+4, trimFloat(v))
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`, left, py(v), W-right, py(v))
	}
	seen := map[float64]bool{}
	for _, l := range s.Lines {
		for _, p := range l.Points {
			if !seen[p[0]] {
				seen[p[0]] = true
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`, px(p[0]), H-bottom+14, html.EscapeString(sizeLabel(p[0], s.LogX)))
			}
		}
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`, (left+W-right)/2, H-6, html.EscapeString(s.XLabel))
	fmt.Fprintf(&b, `<text x="12" y="%.0f" transform="rotate(-90 12 %.0f)" text-anchor="middle">%s</text>`, (top+H-bottom)/2, (top+H-bottom)/2, html.EscapeString(s.YLabel))
	legendY := int(top) + 10
	for i, l := range s.Lines {
		c := palette[i%len(palette)]
		var pts []string
		for _, p := range l.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, px(p[0]), py(p[1]), c)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, c, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="12" height="3" fill="%s"/><text class="label" x="%.0f" y="%d">`,
			W-right+10, legendY-4, c, W-right+26, legendY)
		lines := wrapWords(l.Label, legendChars)
		for j, t := range lines {
			dy := 0
			if j > 0 {
				dy = textLineH
			}
			fmt.Fprintf(&b, `<tspan x="%.0f" dy="%d">%s</tspan>`, W-right+26, dy, html.EscapeString(t))
		}
		b.WriteString(`</text>`)
		legendY += len(lines)*textLineH + 4
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func trimFloat(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// sizeLabel prints byte sizes on log axes ("64K", "16M") and plain numbers
// otherwise.
func sizeLabel(v float64, bytes bool) string {
	if !bytes {
		return trimFloat(v)
	}
	for _, u := range []struct {
		s string
		n float64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if v >= u.n {
			return trimFloat(v/u.n) + u.s
		}
	}
	return trimFloat(v)
}
