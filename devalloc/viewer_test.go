package devalloc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// The viewer check runs PyTorch's own memory viewer, MemoryViz.js, in node
// over devalloc's pickles, through our harness
// testdata/memviz/segment_view_check.js (its README says how). PyTorch's
// wheels do not ship the file (torch 2.11's _memory_viz.py imports it from
// a CDN; checked on the GPU machine): it comes from a PyTorch source
// checkout, named by ACCELKIT_MEMORYVIZ_JS or found in a torch package
// installed from source.
const (
	envMemoryVizJS      = "ACCELKIT_MEMORYVIZ_JS"      // the viewer's path, if not found through Python
	envPython           = "ACCELKIT_PYTHON"            // the python whose torch package to use; python3 if unset
	envRequireMemoryViz = "ACCELKIT_REQUIRE_MEMORYVIZ" // fail instead of skipping without node or the viewer
	envRequireNode      = "ACCELKIT_REQUIRE_NODE"      // fail instead of skipping without node
	viewerHarness       = "testdata/memviz/segment_view_check.js"
)

const enableViewer = "set " + envMemoryVizJS + "=/path/to/pytorch/torch/utils/viz/MemoryViz.js " +
	"(a PyTorch source checkout: the wheels do not ship it), or install PyTorch from source for python3 (" +
	envPython + " names another python); " + envRequireMemoryViz +
	"=1 turns this skip into a failure. The trace is still checked without it, by TestTraceReplaysOntoSegments"

// findMemoryViz returns the path of PyTorch's MemoryViz.js: the one
// ACCELKIT_MEMORYVIZ_JS names, else the one in the torch package that
// python finds. It asks importlib for the package's location instead of
// importing torch, which takes seconds. An empty path with a nil error
// says why none was found; an error is a setting that is wrong.
func findMemoryViz() (path, why string, err error) {
	if p := os.Getenv(envMemoryVizJS); p != "" {
		fi, err := os.Stat(p)
		if err != nil {
			return "", "", fmt.Errorf("%s=%q: %w", envMemoryVizJS, p, err)
		}
		if !fi.Mode().IsRegular() {
			return "", "", fmt.Errorf("%s=%q is not a file", envMemoryVizJS, p)
		}
		return p, "", nil
	}
	py := os.Getenv(envPython)
	if py == "" {
		var err error
		if py, err = exec.LookPath("python3"); err != nil {
			return "", "no python3 is installed to find PyTorch with", nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const find = "import importlib.util as u; s = u.find_spec('torch'); " +
		"print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')"
	out, err := exec.CommandContext(ctx, py, "-c", find).Output()
	if err != nil {
		if os.Getenv(envPython) != "" {
			return "", "", fmt.Errorf("%s=%q: asking it for torch's location: %w", envPython, py, err)
		}
		return "", fmt.Sprintf("%s could not be asked for torch's location (%v)", py, err), nil
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", py + " has no torch package", nil
	}
	p := filepath.Join(dir, "utils", "viz", "MemoryViz.js")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Sprintf("the torch package at %s has no utils/viz/MemoryViz.js (%v)", dir, err), nil
	}
	return p, "", nil
}

// viewerSetup returns node and MemoryViz.js, or skips the test (fails it
// under ACCELKIT_REQUIRE_MEMORYVIZ, or for a missing node under
// ACCELKIT_REQUIRE_NODE) saying how to enable it.
func viewerSetup(t *testing.T) (node, viz string) {
	t.Helper()
	require := os.Getenv(envRequireMemoryViz) != ""
	node, err := exec.LookPath("node")
	if err != nil {
		msg := "node is not installed: PyTorch's viewer cannot be run over devalloc's pickles; install Node.js 18 or later, and " + enableViewer
		if require || os.Getenv(envRequireNode) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	viz, why, err := findMemoryViz()
	if err != nil {
		t.Fatal(err)
	}
	if viz == "" {
		msg := "PyTorch's viewer (torch/utils/viz/MemoryViz.js) not found: " + why + "; to run this test " + enableViewer
		if require {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, viz
}

// viewerReport is what the harness prints on stdout.
type viewerReport struct {
	Files []struct {
		File    string         `json:"file"`
		Error   string         `json:"error"`
		Devices []viewerDevice `json:"devices"`
	} `json:"files"`
}

type viewerDevice struct {
	Device    int     `json:"device"`
	Events    int     `json:"events"`
	Drawn     int     `json:"drawn"`
	Reserved  float64 `json:"reserved"`
	Allocated float64 `json:"allocated"`
	Failures  []struct {
		From  int    `json:"from"`
		To    int    `json:"to"`
		Error string `json:"error"`
	} `json:"failures"`
}

// runViewer writes snap's pickle and runs the harness over it. It returns
// the harness's exit status (0 or 1), its report on the file and its
// summary; any other outcome fails the test.
func runViewer(t *testing.T, node, viz string, snap *memsnap.Snapshot) (int, []viewerDevice, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "snap.pickle")
	var buf bytes.Buffer
	if err := snap.WritePickle(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, viewerHarness, viz, path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s: %v", viewerHarness, err)
	}
	if code == 2 {
		t.Fatalf("%s could not drive %s (a PyTorch version the harness does not know; see testdata/memviz/README.md):\n%s",
			viewerHarness, viz, stderr.String())
	}
	if code != 0 && code != 1 {
		t.Fatalf("%s exited %d:\n%s", viewerHarness, code, stderr.String())
	}
	var rep viewerReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Files) != 1 {
		t.Fatalf("%s printed %q (%v), want one JSON report on one file; stderr:\n%s", viewerHarness, stdout.String(), err, stderr.String())
	}
	if rep.Files[0].Error != "" {
		t.Fatalf("the viewer could not read the pickle: %s", rep.Files[0].Error)
	}
	return code, rep.Files[0].Devices, stderr.String()
}

// viewerIndexes returns the index the viewer gives each trace entry, -1
// for a free_completed it folds into the free_requested just before it
// (annotate_snapshot shows the pair as one "free" event), and the number
// of events the viewer shows.
func viewerIndexes(tr []memsnap.TraceEntry) ([]int, int) {
	idx := make([]int, len(tr))
	n := 0
	lastAction, lastAddr := "", uint64(0)
	for i, e := range tr {
		if e.Action == memsnap.ActionFreeCompleted && lastAction == memsnap.ActionFreeRequested && lastAddr == e.Addr {
			idx[i] = -1
			lastAction = "free"
			continue
		}
		idx[i] = n
		n++
		lastAction, lastAddr = e.Action, e.Addr
	}
	return idx, n
}

// checkViewerDrew checks that the viewer drew every event index of every
// device of snap and that at the newest index it shows the snapshot's own
// reserved and allocated bytes (the sizes of the segments, the requested
// sizes of the active blocks).
func checkViewerDrew(t *testing.T, snap *memsnap.Snapshot, devs []viewerDevice, summary string) {
	t.Helper()
	var want []int
	for d, tr := range snap.DeviceTraces {
		if len(tr) > 0 || slices.ContainsFunc(snap.Segments, func(s memsnap.SegmentInfo) bool { return s.Device == d }) {
			want = append(want, d)
		}
	}
	var got []int
	for _, dv := range devs {
		got = append(got, dv.Device)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the viewer showed devices %v, want %v", got, want)
	}
	for _, dv := range devs {
		_, n := viewerIndexes(snap.DeviceTraces[dv.Device])
		if dv.Events != n || dv.Drawn != max(n, 1) {
			t.Errorf("device %d: the viewer drew %d of %d event indexes (it shows %d events, want %d):\n%s",
				dv.Device, dv.Drawn, max(dv.Events, 1), dv.Events, n, summary)
			continue
		}
		var reserved, allocated uint64
		for _, s := range snap.Segments {
			if s.Device != dv.Device {
				continue
			}
			reserved += s.TotalSize
			for _, b := range s.Blocks {
				if b.State == memsnap.StateActiveAllocated || b.State == memsnap.StateActivePendingFree {
					allocated += b.RequestedSize
				}
			}
		}
		if dv.Reserved != float64(reserved) || dv.Allocated != float64(allocated) {
			t.Errorf("device %d: at the newest event the viewer shows %.0f reserved, %.0f allocated; the snapshot holds %d, %d",
				dv.Device, dv.Reserved, dv.Allocated, reserved, allocated)
		}
	}
}

// device1Workload maps and unmaps expandable pages on device 1 of a
// two-device sim with block stacks recorded, so the viewer reads a
// snapshot whose trace list starts with device 0's empty one, and builds
// tooltips from real frames.
func device1Workload(t *testing.T) *memsnap.Snapshot {
	t.Helper()
	dev, err := drivertest.OpenDriver(t, "sim", "devices=2,capacity=256MiB").Device(1)
	if err != nil {
		t.Fatal(err)
	}
	ss := streams(t, dev, 2)
	a := newAlloc(t, dev, "expandable_segments:true,history_entries:1000,history_stacks:true")
	var held []driver.Ptr
	for i, size := range []uint64{3 * mib, 100 * kib, 30 * mib, 5 * mib, 64 * kib, 12 * mib} {
		p := mustAlloc(t, a, size, ss[i%2])
		held = append(held, p)
	}
	for _, i := range []int{2, 0, 4} {
		mustFree(t, a, held[i])
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	mustAlloc(t, a, 7*mib, ss[0])
	snap := a.Snapshot()
	framed := 0
	for _, s := range snap.Segments {
		for _, b := range s.Blocks {
			if len(b.Frames) > 0 {
				framed++
			}
		}
	}
	if framed == 0 {
		t.Fatal("no live block has frames: the tooltips are built from none")
	}
	return snap
}

// TestViewerSegmentView runs PyTorch's memory viewer over devalloc's
// pickles: its unpickler, its annotation, and its segment view
// ("Allocator State History") drawn and hovered at every event index.
// The viewer undoes the trace from the newest entry back to the one
// selected, and threw ("Cannot read properties of undefined (reading
// 'addr')") at most indexes of expandable snapshots while segment_map
// entries carried the merged block's start. Skipped without node or a
// PyTorch installation; see enableViewer.
func TestViewerSegmentView(t *testing.T) {
	node, viz := viewerSetup(t)
	t.Logf("viewer: %s", viz)
	for _, c := range []struct {
		name string
		snap func(t *testing.T) *memsnap.Snapshot
		act  string // an action the trace must hold, or the case tests nothing
	}{
		{"expandable", func(t *testing.T) *memsnap.Snapshot {
			return traceWorkload(t, "expandable_segments:true,history_entries:100000", 0, 400)
		}, memsnap.ActionSegmentMap},
		// The ring wraps: the trace starts mid-history, with blocks and
		// pages the viewer never sees allocated.
		{"expandable-wrapped", func(t *testing.T) *memsnap.Snapshot {
			return traceWorkload(t, "expandable_segments:true,history_entries:300", 1, 400)
		}, memsnap.ActionSegmentUnmap},
		{"plain", func(t *testing.T) *memsnap.Snapshot {
			return traceWorkload(t, "history_entries:100000", 2, 400)
		}, memsnap.ActionSegmentFree},
		{"expandable-device1-stacks", device1Workload, memsnap.ActionSegmentUnmap},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap := c.snap(t)
			if !slices.ContainsFunc(snap.DeviceTraces[len(snap.DeviceTraces)-1], func(e memsnap.TraceEntry) bool { return e.Action == c.act }) {
				t.Fatalf("the workload recorded no %s entry: it tests nothing", c.act)
			}
			code, devs, summary := runViewer(t, node, viz, snap)
			if code != 0 {
				t.Fatalf("the viewer threw:\n%s", summary)
			}
			checkViewerDrew(t, snap, devs, summary)
		})
	}

	// The check can fail: a segment_map entry moved off every segment
	// makes the viewer throw at every index before it, where undoing the
	// trace reaches it, and nowhere else.
	t.Run("corrupt-segment-map", func(t *testing.T) {
		snap := traceWorkload(t, "expandable_segments:true,history_entries:100000", 0, 400)
		tr := snap.DeviceTraces[0]
		idx, _ := viewerIndexes(tr)
		var maps []int
		for i, e := range tr {
			if e.Action == memsnap.ActionSegmentMap && idx[i] > 0 {
				maps = append(maps, i)
			}
		}
		if len(maps) == 0 {
			t.Fatal("the workload recorded no segment_map entry after the first event")
		}
		i := maps[len(maps)/2]
		var end uint64
		for _, s := range snap.Segments {
			end = max(end, s.Address+s.TotalSize)
		}
		tr[i].Addr = end + 1<<30
		code, devs, summary := runViewer(t, node, viz, snap)
		if code != 1 || len(devs) != 1 {
			t.Fatalf("harness exit %d over %d devices, want 1 (a draw threw) over 1:\n%s", code, len(devs), summary)
		}
		f := devs[0].Failures
		if len(f) != 1 || f[0].From != 0 || f[0].To != idx[i]-1 {
			t.Fatalf("the viewer threw at %+v, want indexes 0-%d (before the segment_map at viewer index %d):\n%s",
				f, idx[i]-1, idx[i], summary)
		}
		t.Logf("as expected, with segment_map %d moved to %#x: %s", idx[i], tr[i].Addr, f[0].Error)
	})
}
