package report

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func sample() *Results {
	met, missed := true, false
	r := &Results{
		Schema: Schema, Started: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), Seconds: 12.5,
		Command: "accbench -quick", Driver: "sim", Device: "accelkit sim device 0", Simulated: true, Count: 3,
		Host: Host{OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, CPUModel: "test cpu", MemoryGiB: 24, GoVersion: "go1.26"},
		Load: Load{Start: &LoadSample{Load1: 0.4, Load5: 0.3, Load15: 0.2, CPUs: 2, GOMAXPROCS: 2},
			End: &LoadSample{Load1: 1.5, Load5: 0.6, Load15: 0.3, CPUs: 2, GOMAXPROCS: 2}},
		RatioLegend: RatioLegend,
		Unmeasured:  []Unmeasured{{Suite: "devalloc", Case: "hit path", Goal: ">= 2x PyTorch", Reason: "PyTorch not run: -peers PYTHON on a CUDA machine"}},
		Suites: []Suite{
			{Name: "devalloc", Title: "caching vs passthrough", Rows: []Row{
				{Case: "churn 1 goroutine", Unit: "ns/op", Ours: NewStat(100, 120, 110), BaseName: "passthrough", Base: &Stat{Median: 5000, N: 1}, Goal: ">= 20x", GoalMet: &met},
				{Case: "<script>alert(1)</script>", Unit: "ns/op", Ours: NewStat(300), BaseName: "x", Base: &Stat{Median: 100, N: 1}, Goal: ">= 1x", GoalMet: &missed},
				{Case: "retries", Unit: "count", Ours: NewStat(0)},
			}},
			// Labels that differ only at the end: a chart must show them whole.
			{Name: "replay", Title: "traces", Rows: []Row{
				{Case: "training: peak reserved / peak allocated, plain, PyTorch policy replayed here", Unit: "x", Ours: NewStat(1.04), BaseName: "PyTorch policy", Base: &Stat{Median: 1.05, N: 1}},
				{Case: "training: peak reserved / peak allocated, expandable, PyTorch policy replayed here", Unit: "x", Ours: NewStat(1.03), BaseName: "PyTorch policy", Base: &Stat{Median: 1.02, N: 1}},
			}},
			{Name: "h2d", Title: "staged vs direct copies", Rows: []Row{
				{Case: "64 MiB", Unit: "GB/s", HigherBetter: true, Ours: NewStat(8), BaseName: "direct", Base: &Stat{Median: 4, N: 1}},
			}, Series: []Series{{Name: "H2D bandwidth", XLabel: "bytes", YLabel: "GB/s", LogX: true, Lines: []Line{
				{Label: "staged", Points: [][2]float64{{4096, 1}, {1 << 20, 5}, {64 << 20, 8}}},
				{Label: "direct", Points: [][2]float64{{4096, 0.5}, {1 << 20, 3}, {64 << 20, 4}}},
			}}}},
			{Name: "broken", Title: "a failing suite", Error: "open: no device\nmore"},
			{Name: "absent", Title: "a suite that needs a missing program", Skipped: "tool not found in PATH: install it (apt-get install tool)"},
		},
	}
	for i := range r.Suites {
		for j := range r.Suites[i].Rows {
			r.Suites[i].Rows[j].ComputeRatio()
		}
	}
	return r
}

func TestStat(t *testing.T) {
	s := NewStat(3, 1, 2, 10)
	if s.Median != 2.5 || s.Min != 1 || s.Max != 10 || s.N != 4 {
		t.Errorf("NewStat = %+v", s)
	}
	if got := s.Spread(); got != 9/2.5 {
		t.Errorf("Spread = %v", got)
	}
}

func TestRatioDirection(t *testing.T) {
	r := sample()
	if got := r.Suites[0].Rows[0].Ratio; got < 45 || got > 46 {
		t.Errorf("time ratio = %v, want 5000/110", got)
	}
	if got := r.Suites[2].Rows[0].Ratio; got != 2 {
		t.Errorf("bandwidth ratio = %v, want 8/4", got)
	}
}

// TestRatioOfPairs: with ours and the baseline measured in the same
// repetitions, the ratio is the median of the repetitions' ratios, not
// the ratio of the medians; with unpaired figures it is the latter.
func TestRatioOfPairs(t *testing.T) {
	// Repetition ratios 120/145, 130/161, 108/126, 112/135, 113/159:
	// median 120/145 = 0.828; the ratio of the medians is 113/145 = 0.779.
	base := NewStat(120, 130, 108, 112, 113)
	r := Row{Unit: "us/op", Ours: NewStat(145, 161, 126, 135, 159), Base: &base}
	r.ComputeRatio()
	if want := 120.0 / 145; math.Abs(r.Ratio-want) > 1e-9 {
		t.Errorf("paired ratio = %v, want the median of the pairs' %v", r.Ratio, want)
	}
	r.HigherBetter = true
	r.ComputeRatio()
	if want := 145.0 / 120; math.Abs(r.Ratio-want) > 1e-9 {
		t.Errorf("paired rate ratio = %v, want %v", r.Ratio, want)
	}
	one := NewStat(100)
	r = Row{Unit: "us/op", Ours: NewStat(145, 161, 126), Base: &one}
	r.ComputeRatio()
	if want := 100.0 / 145; math.Abs(r.Ratio-want) > 1e-9 {
		t.Errorf("unpaired ratio = %v, want the ratio of the medians %v", r.Ratio, want)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := sample().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Suites) != 5 || got.Suites[2].Series[0].Lines[1].Points[2][1] != 4 || got.Suites[4].Skipped != sample().Suites[4].Skipped ||
		got.Load.End.Load1 != 1.5 || got.Unmeasured[0].Reason != sample().Unmeasured[0].Reason {
		t.Errorf("round trip lost data: %+v", got)
	}
	if _, err := ReadJSON(strings.NewReader(`{"schema": 99}`)); err == nil || !strings.Contains(err.Error(), "schema 99") {
		t.Errorf("foreign schema: err = %v", err)
	}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	if err := sample().WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"simulated", "churn 1 goroutine", "45.5x", ">= 20x met", "MISSED", "FAILED: open: no device", "2.00x",
		"SKIPPED: tool not found in PATH: install it (apt-get install tool)", RatioLegend,
		"load 0.40 0.30 0.20 at start, 1.50 0.60 0.30 at end (1, 5, 15 min)", "1 more figures are 0",
		"verdict: 1 goals met, 1 missed, 1 not measurable here (and suites skipped: 1); 1 suites failed",
		"not measurable here, PyTorch not run: -peers PYTHON on a CUDA machine: devalloc / hit path (>= 2x PyTorch)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(strings.ToLower(out), "busy") {
		t.Errorf("a load of 1.5 on 2 CPUs is not busy:\n%s", out)
	}
	if strings.Contains(out, "\n  retries ") {
		t.Errorf("a figure of 0 with nothing to compare it to is listed:\n%s", out)
	}
}

// TestTableFitsTerminal renders the table of a real run (testdata: sim
// -quick on the 2-vCPU developer machine) and of rows too long for any
// column: no line is wider than 120 columns, and the verdict is the last
// block, so a person reads it without scrolling back.
func TestTableFitsTerminal(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "quick-sim.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	quick, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	long := sample()
	long.Host.CPUModel = strings.Repeat("Intel(R) Xeon(R) Platinum ", 6)
	long.Suites[0].Rows[0].Case = strings.Repeat("a very long case name ", 8) + "plain"
	long.Suites[0].Rows[0].BaseName = strings.Repeat("a long baseline ", 6)
	long.Suites[0].Rows[0].Goal = strings.Repeat(">= 2x ", 30)
	for name, r := range map[string]*Results{"quick-sim.json": quick, "long names": long} {
		var buf bytes.Buffer
		if err := r.WriteTable(&buf); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		for i, l := range lines {
			if n := utf8.RuneCountInString(l); n > TableWidth {
				t.Errorf("%s: line %d is %d columns wide: %q", name, i+1, n, l)
			}
		}
		blocks := strings.Split(strings.TrimRight(out, "\n"), "\n\n")
		if last := blocks[len(blocks)-1]; !strings.HasPrefix(last, "verdict: ") || strings.Count(out, "verdict: ") != 1 {
			t.Errorf("%s: the last block is not the verdict:\n%s", name, last)
		}
		if name == "quick-sim.json" {
			if strings.Contains(out, "…") {
				t.Errorf("a real run's table cuts a cell:\n%s", out)
			}
			t.Logf("%d lines", len(lines))
		}
	}
}

func TestBusy(t *testing.T) {
	for _, tc := range []struct {
		start, end float64
		busy       bool
	}{{0.2, 0.9, false}, {1.0, 1.0, false}, {1.01, 0.1, true}, {0.1, 3.7, true}} {
		l := Load{Start: &LoadSample{Load1: tc.start, CPUs: 2}, End: &LoadSample{Load1: tc.end, CPUs: 2}}
		l.Judge()
		if l.Busy != tc.busy || l.BusyRule == "" || (l.BusyWarning() != "") != tc.busy {
			t.Errorf("load %v then %v on 2 CPUs: busy %v, warning %q; want busy %v", tc.start, tc.end, l.Busy, l.BusyWarning(), tc.busy)
		}
	}
	r := sample()
	r.Load = Load{Unavailable: "no /proc/loadavg on darwin"}
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "load average not recorded (no /proc/loadavg on darwin)") {
		t.Errorf("the table does not say why there is no load:\n%s", buf.String())
	}
	r.Load = Load{Start: &LoadSample{Load1: 3.72, Load5: 3.5, Load15: 3.96, CPUs: 2}}
	r.Load.Judge()
	buf.Reset()
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(strings.TrimSpace(buf.String()), "\n\n")
	if !strings.Contains(blocks[0], "load 3.72 3.50 3.96 at start (1, 5, 15 min): BUSY") ||
		!strings.Contains(blocks[len(blocks)-1], "WARNING: busy machine (load 3.72 3.50 3.96 at start") {
		t.Errorf("a busy run warns neither at the top nor in the verdict:\n%s", buf.String())
	}
	html := string(mustHTML(t, r))
	if !strings.Contains(html, `id="busy"`) || !strings.Contains(html, "3.72 3.50 3.96") {
		t.Error("the report does not warn of the busy machine")
	}
}

func mustHTML(t *testing.T, r *Results) []byte {
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func renderHTML(t *testing.T) string { return string(mustHTML(t, sample())) }

func TestHTMLSelfContained(t *testing.T) {
	out := renderHTML(t)
	for _, bad := range []string{"<script>", "src=", "href=\"http", "@import", "url("} {
		if strings.Contains(out, bad) {
			t.Errorf("report contains %q: it must load nothing and run no script", bad)
		}
	}
	if !strings.Contains(out, "&lt;script&gt;") {
		t.Error("case names are not escaped")
	}
	for _, id := range []string{"suite-devalloc", "suite-replay", "suite-h2d", "suite-broken", "suite-absent", "verdict", "legend"} {
		if !strings.Contains(out, `id="`+id+`"`) {
			t.Errorf("no section %s", id)
		}
	}
	if !strings.Contains(out, `<p class="skip">Skipped: tool not found in PATH: install it (apt-get install tool)</p>`) {
		t.Error("the skipped suite does not say why")
	}
	if n := strings.Count(out, "<svg"); n != 4 { // devalloc and replay bars, h2d bars + line chart
		t.Errorf("%d charts, want 4", n)
	}
}

// TestHTMLInChromium renders the report in headless Chromium: the page must
// paint (a non-blank screenshot) and every suite with figures must have its
// chart in the rendered DOM. CI installs chromium (.ci/run); elsewhere the
// test skips without it.
func TestHTMLInChromium(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("ACCELKIT_REQUIRE_CHROMIUM") != "" {
			t.Fatal("ACCELKIT_REQUIRE_CHROMIUM is set but no chromium is installed")
		}
		t.Skip("no chromium installed (apt-get install chromium)")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, []byte(renderHTML(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1200,1600"}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, append(base, "--screenshot="+shot, "file://"+page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium screenshot: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	colors := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colors[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if len(colors) < 8 {
		t.Errorf("screenshot has %d colours: the page rendered blank", len(colors))
	}
	// The DOM of the report with a probe appended: it measures each SVG
	// text as laid out and lists the ones cut (an ellipsis) or reaching
	// past their chart's edges, where the SVG hides them.
	report := renderHTML(t)
	probe := filepath.Join(dir, "probe.html")
	if err := os.WriteFile(probe, []byte(strings.Replace(report, "</body>", probeScript+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, err := exec.CommandContext(ctx, bin, append(base, "--dump-dom", "file://"+probe)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, name := range []string{"devalloc", "replay", "h2d"} {
		sec := sectionOf(string(dom), name)
		if !strings.Contains(sec, "<svg") {
			t.Errorf("rendered section %s has no chart", name)
		}
	}
	var got struct {
		Texts  int      `json:"texts"`
		Labels []string `json:"labels"`
		Bad    []string `json:"bad"`
	}
	m := regexp.MustCompile(`(?s)<pre id="probe">(.*?)</pre>`).FindStringSubmatch(string(dom))
	if m == nil {
		t.Fatalf("the probe did not run:\n%s", dom)
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &got); err != nil {
		t.Fatalf("probe output %q: %v", m[1], err)
	}
	if got.Texts < 10 {
		t.Errorf("the probe measured %d texts", got.Texts)
	}
	for _, b := range got.Bad {
		t.Errorf("chart text cut: %s", b)
	}
	// Each bar label reads as its whole case name, wrapped or not.
	for _, s := range sample().Suites {
		for _, r := range s.Rows {
			if r.Ratio > 0 && !slices.Contains(got.Labels, r.Case) {
				t.Errorf("no chart label reads %q; labels: %q", r.Case, got.Labels)
			}
		}
	}
}

// probeScript measures the report's SVG text in the browser.
const probeScript = `<pre id="probe"></pre><script>
(function () {
  var bad = [], labels = [], texts = document.querySelectorAll("svg text");
  texts.forEach(function (t) {
    // Client rectangles, so that rotated text is measured as drawn.
    var svg = t.ownerSVGElement.getBoundingClientRect(), r = t.getBoundingClientRect();
    var b = {x: r.left - svg.left, y: r.top - svg.top, width: r.width, height: r.height}, w = svg.width, h = svg.height;
    var words = t.textContent;
    if (t.querySelectorAll("tspan").length) {
      words = Array.prototype.map.call(t.querySelectorAll("tspan"), function (s) { return s.textContent; }).join(" ");
    }
    if (t.classList.contains("label")) labels.push(words);
    if (words.indexOf("\u2026") >= 0 || words.indexOf("...") >= 0) bad.push(JSON.stringify(words) + " is cut with an ellipsis");
    if (b.x < -0.5 || b.y < -0.5 || b.x + b.width > w + 0.5 || b.y + b.height > h + 0.5)
      bad.push(JSON.stringify(words) + " at x " + b.x.toFixed(1) + ".." + (b.x + b.width).toFixed(1) + " of " + w + ", y " + b.y.toFixed(1) + ".." + (b.y + b.height).toFixed(1) + " of " + h);
  });
  document.getElementById("probe").textContent = JSON.stringify({texts: texts.length, labels: labels, bad: bad});
})();
</script>`

func sectionOf(dom, name string) string {
	i := strings.Index(dom, `id="suite-`+name+`"`)
	if i < 0 {
		return ""
	}
	rest := dom[i:]
	if j := strings.Index(rest, "</section>"); j >= 0 {
		return rest[:j]
	}
	return rest
}

// TestSkippedCase: a case that did not run while its suite did is named
// in the table, the verdict and the HTML with the reason, is neither a
// quiet zero nor a figure, and survives results.json.
func TestSkippedCase(t *testing.T) {
	r := sample()
	r.Suites = []Suite{{Name: "kernels", Title: "kernels", Rows: []Row{
		{Case: "launch latency", Unit: "us/launch", Ours: NewStat(4)},
		{Case: "cold compile", Unit: "ms/op", Skipped: "no NVRTC: libnvrtc.so.13 not found\nsecond line"},
		{Case: "warm path", Unit: "us/op", Skipped: "no NVRTC: libnvrtc.so.13 not found\nsecond line"},
	}}}
	r.Unmeasured = nil
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"  cold compile: SKIPPED: no NVRTC: libnvrtc.so.13 not found\n",
		"  warm path: SKIPPED, as above\n",
		"verdict: 0 goals met, 0 missed, 0 not measurable here (and cases skipped: 2)",
		"not measurable here: kernels / cold compile; kernels / warm path and their goals: no NVRTC: libnvrtc.so.13 not found"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "more figures are 0") || strings.Contains(out, "second line") {
		t.Errorf("the skipped case is counted as a zero figure or prints its reason past the first line:\n%s", out)
	}
	if h := string(mustHTML(t, r)); !strings.Contains(h, `<td class="skip" colspan="5">Skipped: no NVRTC: libnvrtc.so.13 not found`) {
		t.Errorf("the HTML does not say why the case was skipped:\n%s", h)
	}
	buf.Reset()
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Suites[0].Rows[1].Skipped; got != r.Suites[0].Rows[1].Skipped {
		t.Errorf("results.json keeps Skipped %q; want %q", got, r.Suites[0].Rows[1].Skipped)
	}
}
