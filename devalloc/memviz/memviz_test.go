package memviz

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver/drivertest"
)

func TestRender(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	cfg, _ := devalloc.ParseConfig("history_entries:100")
	a, err := devalloc.New(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := dev.DefaultStream()
	p, _ := a.Alloc(4096, s)
	q, _ := a.Alloc(3<<20, s)
	a.Free(q)
	var buf bytes.Buffer
	if err := Render(&buf, a.Snapshot()); err != nil {
		t.Fatal(err)
	}
	a.Free(p)
	page := buf.String()
	for _, want := range []string{"<!DOCTYPE html>", `<section id="segments">`, `<section id="timeline">`, "<polyline", "active_allocated", "inactive"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// One svg per section, each well-formed XML; nothing loaded from outside.
	for _, sec := range []string{`id="segments"`, `id="timeline"`} {
		i := strings.Index(page, sec)
		rest := page[i:]
		svg := rest[strings.Index(rest, "<svg"):]
		svg = svg[:strings.Index(svg, "</svg>")+len("</svg>")]
		if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
			t.Errorf("section %s: svg is not well-formed: %v", sec, err)
		}
	}
	if strings.Contains(page, "src=") || strings.Contains(page, "href=") {
		t.Errorf("page references external resources")
	}
	if n := strings.Count(page, "<rect"); n != 3 { // 4 KiB + rest of the small segment, one free 20 MiB block
		t.Errorf("%d rects, want 3", n)
	}
}

// TestTimelineUsesTime checks that the chart's x axis is the trace's time,
// not event order: three events at 0, 100 and 1000 us land at 0, 10% and
// 100% of the plot width, and the labels give the span and the peak.
func TestTimelineUsesTime(t *testing.T) {
	snap := &memsnap.Snapshot{DeviceTraces: [][]memsnap.TraceEntry{{
		{Action: memsnap.ActionSegmentAlloc, Size: 2 << 20, TimeUS: 5000},
		{Action: memsnap.ActionAlloc, Size: 1 << 20, TimeUS: 5100},
		{Action: memsnap.ActionFreeCompleted, Size: 1 << 20, TimeUS: 6000},
	}}}
	var b strings.Builder
	timeline(&b, snap)
	page := b.String()
	plotW := float64(width - plotLeft - 10)
	for _, frac := range []float64{0, 0.1, 1} {
		if x := fmt.Sprintf("%.1f,", plotLeft+frac*plotW); !strings.Contains(page, x) {
			t.Errorf("no point at x=%s (%.0f%% of the span)", x, frac*100)
		}
	}
	for _, want := range []string{"1.000 ms", "2.0 MiB", "reserved", "allocated"} {
		if !strings.Contains(page, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if err := xml.Unmarshal([]byte(page), new(struct{})); err != nil {
		t.Errorf("chart is not well-formed: %v", err)
	}
}
