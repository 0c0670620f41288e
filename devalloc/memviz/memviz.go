// Package memviz renders a memsnap.Snapshot as one self-contained HTML
// page with inline SVG: a segment map (one bar per segment, blocks sized by
// bytes and coloured by state) and a memory-over-time chart built from the
// snapshot's trace (allocated and reserved bytes over the entries'
// time_us, with labelled axes and a legend). The page loads nothing from
// elsewhere.
package memviz

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/accelkit/accelkit/devalloc/memsnap"
)

// Layout constants: wide enough to see 512 B blocks in a 2 MiB segment at
// a glance, small enough to print.
const (
	width     = 960
	barHeight = 14
	chartH    = 240
)

var stateColour = map[string]string{
	memsnap.StateActiveAllocated:   "#d9534f",
	memsnap.StateActivePendingFree: "#f0ad4e",
	memsnap.StateInactive:          "#5cb85c",
}

// Render writes the HTML page for snap to w.
func Render(w io.Writer, snap *memsnap.Snapshot) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>devalloc memory snapshot</title>\n")
	b.WriteString("<style>body{font-family:sans-serif;margin:1em}svg{border:1px solid #ccc}</style></head><body>\n")
	b.WriteString("<h1>devalloc memory snapshot</h1>\n")
	fmt.Fprintf(&b, "<p>%d segments; allocated %d bytes, reserved %d bytes.</p>\n",
		len(snap.Segments), snap.Stats["allocated_bytes.all.current"], snap.Stats["reserved_bytes.all.current"])
	b.WriteString("<section id=\"segments\"><h2>Segment map</h2>\n")
	segmentMap(&b, snap)
	b.WriteString("</section>\n<section id=\"timeline\"><h2>Memory over time</h2>\n")
	timeline(&b, snap)
	b.WriteString("</section>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func segmentMap(b *strings.Builder, snap *memsnap.Snapshot) {
	h := max(1, len(snap.Segments)) * (barHeight + 4)
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n", width, h)
	for i, seg := range snap.Segments {
		y := i * (barHeight + 4)
		for _, blk := range seg.Blocks {
			if seg.TotalSize == 0 {
				break
			}
			x := float64(blk.Address-seg.Address) / float64(seg.TotalSize) * width
			wd := max(0.5, float64(blk.Size)/float64(seg.TotalSize)*width)
			col, ok := stateColour[blk.State]
			if !ok {
				col = "#999"
			}
			fmt.Fprintf(b, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>%s %#x %d bytes (stream %d, %s)</title></rect>\n",
				x, y, wd, barHeight, col, html.EscapeString(blk.State), blk.Address, blk.Size, seg.Stream, html.EscapeString(seg.SegmentType))
		}
	}
	b.WriteString("</svg>\n")
}

// Chart margins: room for the axis labels left of and below the plot.
const (
	plotLeft   = 80
	plotBottom = 30
	plotTop    = 24
)

// timeline draws allocated and reserved bytes against the trace's time_us
// as step lines (each event changes memory at its instant), with the time
// span and the peak on the axes and a legend. Entries recorded within the
// same microsecond stack vertically.
func timeline(b *strings.Builder, snap *memsnap.Snapshot) {
	type point struct{ t, allocated, reserved int64 }
	var pts []point
	var cur, res int64
	for _, tr := range snap.DeviceTraces {
		for _, e := range tr {
			switch e.Action {
			case memsnap.ActionAlloc:
				cur += int64(e.Size)
			case memsnap.ActionFreeCompleted:
				cur -= int64(e.Size)
			case memsnap.ActionSegmentAlloc, memsnap.ActionSegmentMap:
				res += int64(e.Size)
			case memsnap.ActionSegmentFree, memsnap.ActionSegmentUnmap:
				res -= int64(e.Size)
			}
			pts = append(pts, point{e.TimeUS, cur, res})
		}
	}
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n", width, chartH)
	if len(pts) == 0 {
		fmt.Fprintf(b, "<text x=\"10\" y=\"20\">no trace entries (enable history_entries)</text>\n</svg>\n")
		return
	}
	t0, t1 := pts[0].t, pts[0].t
	var top int64 = 1
	for _, p := range pts {
		t0, t1 = min(t0, p.t), max(t1, p.t)
		top = max(top, p.allocated, p.reserved)
	}
	span := max(1, t1-t0)
	plotW := float64(width - plotLeft - 10)
	plotH := float64(chartH - plotBottom - plotTop)
	x := func(t int64) float64 { return plotLeft + float64(t-t0)/float64(span)*plotW }
	y := func(v int64) float64 { return plotTop + plotH - float64(v)/float64(top)*plotH }
	line := func(val func(point) int64, colour string) {
		var out []string
		prev := int64(0)
		for i, p := range pts {
			if i > 0 {
				out = append(out, fmt.Sprintf("%.1f,%.1f", x(p.t), y(prev)))
			}
			out = append(out, fmt.Sprintf("%.1f,%.1f", x(p.t), y(val(p))))
			prev = val(p)
		}
		fmt.Fprintf(b, "<polyline fill=\"none\" stroke=\"%s\" points=\"%s\"/>\n", colour, strings.Join(out, " "))
	}
	// Axes, their labels and the legend.
	fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.0f\" stroke=\"#333\"/>\n", plotLeft, plotTop, plotLeft, plotTop+plotH)
	fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#333\"/>\n", plotLeft, plotTop+plotH, plotLeft+plotW, plotTop+plotH)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"11\">%s</text>\n", plotLeft-4, plotTop+4, byteLabel(top))
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%.0f\" text-anchor=\"end\" font-size=\"11\">0</text>\n", plotLeft-4, plotTop+plotH)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\">0 ms</text>\n", plotLeft, chartH-8)
	fmt.Fprintf(b, "<text x=\"%.0f\" y=\"%d\" text-anchor=\"end\" font-size=\"11\">%.3f ms</text>\n", plotLeft+plotW, chartH-8, float64(t1-t0)/1000)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"14\" font-size=\"12\" fill=\"#337ab7\">reserved</text>\n", plotLeft+10)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"14\" font-size=\"12\" fill=\"#d9534f\">allocated</text>\n", plotLeft+90)
	line(func(p point) int64 { return p.reserved }, "#337ab7")
	line(func(p point) int64 { return p.allocated }, "#d9534f")
	b.WriteString("</svg>\n")
}

// byteLabel prints n in the largest binary unit that keeps it >= 1.
func byteLabel(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
