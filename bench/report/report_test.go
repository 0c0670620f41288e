package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sample() *Results {
	met, missed := true, false
	r := &Results{
		Schema: Schema, Started: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), Seconds: 12.5,
		Command: "accbench -quick", Driver: "sim", Device: "accelkit sim device 0", Simulated: true, Count: 3,
		Host: Host{OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2, CPUModel: "test cpu", MemoryGiB: 24, GoVersion: "go1.26"},
		Suites: []Suite{
			{Name: "devalloc", Title: "caching vs passthrough", Rows: []Row{
				{Case: "churn 1 goroutine", Unit: "ns/op", Ours: NewStat(100, 120, 110), BaseName: "passthrough", Base: &Stat{Median: 5000, N: 1}, Goal: ">= 20x", GoalMet: &met},
				{Case: "<script>alert(1)</script>", Unit: "ns/op", Ours: NewStat(300), BaseName: "x", Base: &Stat{Median: 100, N: 1}, Goal: ">= 1x", GoalMet: &missed},
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
	if got := r.Suites[1].Rows[0].Ratio; got != 2 {
		t.Errorf("bandwidth ratio = %v, want 8/4", got)
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
	if len(got.Suites) != 4 || got.Suites[1].Series[0].Lines[1].Points[2][1] != 4 || got.Suites[3].Skipped != sample().Suites[3].Skipped {
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
	for _, want := range []string{"simulated", "churn 1 goroutine", "45.5x", ">= 20x ok", "MISSED", "FAILED: open: no device", "2.00x",
		"SKIPPED: tool not found in PATH: install it (apt-get install tool)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func renderHTML(t *testing.T) string {
	var buf bytes.Buffer
	if err := sample().WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

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
	for _, id := range []string{"suite-devalloc", "suite-h2d", "suite-broken", "suite-absent"} {
		if !strings.Contains(out, `id="`+id+`"`) {
			t.Errorf("no section %s", id)
		}
	}
	if !strings.Contains(out, `<p class="skip">Skipped: tool not found in PATH: install it (apt-get install tool)</p>`) {
		t.Error("the skipped suite does not say why")
	}
	if n := strings.Count(out, "<svg"); n != 3 { // devalloc bars, h2d bars + line chart
		t.Errorf("%d charts, want 3", n)
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
	dom, err := exec.CommandContext(ctx, bin, append(base, "--dump-dom", "file://"+page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, name := range []string{"devalloc", "h2d"} {
		sec := sectionOf(string(dom), name)
		if !strings.Contains(sec, "<svg") {
			t.Errorf("rendered section %s has no chart", name)
		}
	}
}

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
