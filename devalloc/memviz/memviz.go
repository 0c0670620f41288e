// Package memviz renders a devalloc.Snapshot as one self-contained HTML
// page with inline SVG: a segment map (one bar per segment, blocks sized by
// bytes and coloured by state) and a memory-over-time chart built from the
// snapshot's trace (allocated and reserved bytes after each event). The
// page loads nothing from elsewhere.
package memviz

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/accelkit/accelkit/devalloc"
)

// Layout constants: wide enough to see 512 B blocks in a 2 MiB segment at
// a glance, small enough to print.
const (
	width     = 960
	barHeight = 14
	chartH    = 240
)

var stateColour = map[string]string{
	devalloc.StateActiveAllocated:   "#d9534f",
	devalloc.StateActivePendingFree: "#f0ad4e",
	devalloc.StateInactive:          "#5cb85c",
}

// Render writes the HTML page for snap to w.
func Render(w io.Writer, snap *devalloc.Snapshot) error {
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

func segmentMap(b *strings.Builder, snap *devalloc.Snapshot) {
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

func timeline(b *strings.Builder, snap *devalloc.Snapshot) {
	var allocated, reserved []int64
	var cur, res int64
	for _, tr := range snap.DeviceTraces {
		for _, e := range tr {
			switch e.Action {
			case devalloc.ActionAlloc:
				cur += int64(e.Size)
			case devalloc.ActionFreeCompleted:
				cur -= int64(e.Size)
			case devalloc.ActionSegmentAlloc, devalloc.ActionSegmentMap:
				res += int64(e.Size)
			case devalloc.ActionSegmentFree, devalloc.ActionSegmentUnmap:
				res -= int64(e.Size)
			}
			allocated = append(allocated, cur)
			reserved = append(reserved, res)
		}
	}
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n", width, chartH)
	var top int64 = 1
	for i := range reserved {
		top = max(top, reserved[i], allocated[i])
	}
	line := func(vals []int64, colour string) {
		if len(vals) == 0 {
			return
		}
		var pts []string
		for i, v := range vals {
			x := float64(i) / float64(max(1, len(vals)-1)) * width
			y := chartH - float64(v)/float64(top)*(chartH-10)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(b, "<polyline fill=\"none\" stroke=\"%s\" points=\"%s\"/>\n", colour, strings.Join(pts, " "))
	}
	line(reserved, "#337ab7")
	line(allocated, "#d9534f")
	if len(allocated) == 0 {
		fmt.Fprintf(b, "<text x=\"10\" y=\"20\">no trace entries (enable history_entries)</text>\n")
	}
	b.WriteString("</svg>\n")
}
