package accbench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/bench/report"
	"github.com/accelkit/accelkit/bench/trace"
	"github.com/accelkit/accelkit/driver"
)

// TestTraceFlagErrors checks that a bad -trace stops the run before any
// suite, with exit status 2 and a message naming the file, the line when
// one is at fault, and what is valid.
func TestTraceFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	h := trace.Header + "\n"
	for _, tc := range []struct {
		name, path string
		args       []string
		want       []string
	}{
		{"missing", filepath.Join(dir, "nosuch.csv"), nil, []string{"nosuch.csv: no such file or directory", "want an RMM logging_resource_adaptor CSV", trace.Header}},
		{"directory", dir, nil, []string{dir + ": not a regular file", "want an RMM"}},
		{"empty", file("empty.csv", ""), nil, []string{"empty.csv:1: empty, want the header"}},
		{"not RMM", file("other.csv", "a,b,c\n"), nil, []string{"other.csv:1: header \"a,b,c\", want"}},
		{"short line", file("short.csv", h+"1,1.5,allocate,0x10,512,0x0\n1,1.6,free,0x10,512\n"), nil, []string{"short.csv:3: 5 fields, want 6"}},
		{"unknown action", file("op.csv", h+"\n1,1.5,alloc,0x10,512,0x0\n"), nil, []string{`op.csv:3: action "alloc": want allocate, free, deallocate or allocate failure`}},
		{"inconsistent", file("dup.csv", h+"1,1.5,allocate,0x10,512,0x0\n1,1.6,allocate,0x10,512,0x0\n"), nil, []string{"dup.csv:3: allocates 0x10, which the trace allocated before and has not freed"}},
		{"header only", file("hdr.csv", h), nil, []string{"hdr.csv: a header and no events"}},
		{"suite left out", file("ok.csv", h+"1,1.5,allocate,0x10,512,0x0\n"), []string{"-suite", "wrlru"}, []string{"ok.csv is replayed by the replay suite", `which -suite "wrlru" leaves out`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"-quick", "-driver", "sim", "-suite", "replay", "-out", out, "-trace", tc.path}, tc.args...)
			code := Main(args, &stdout, &stderr, Extra{})
			if code != 2 {
				t.Errorf("exit %d, want 2\nstderr: %s", code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", stderr.String(), w)
				}
			}
			if strings.Contains(stderr.String(), "] replay") {
				t.Error("a suite ran before the trace was refused")
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("-out was created for a run refused at the start (%v)", err)
			}
		})
	}
}

// TestReplayShowsFailuresAndStreams replays a trace with a stream per
// request on a small device: the table and results.json show the failed
// allocations and unknown frees, and the notes say how many driver
// streams the replay kept alive, which stays near the streams holding
// memory rather than the 3,000 in the trace.
func TestReplayShowsFailuresAndStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the replay suite")
	}
	dir := t.TempDir()
	events := trace.ManyStreams(trace.StreamsParams{Streams: 3000, Size: 1024, Keep: true})
	// Two frees of pointers the trace never allocated.
	events = append(events, trace.Event{Action: trace.Free, Ptr: 0x10, Size: 1}, trace.Event{Action: trace.Free, Ptr: 0x20, Size: 1})
	var buf bytes.Buffer
	if err := trace.Write(&buf, events); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "perstream.csv")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"-quick", "-driver", "sim:capacity=256MiB", "-suite", "replay", "-out", out, "-trace", path}, &stdout, &stderr, Extra{})
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	for _, w := range []string{"perstream plain: failed allocs", "perstream expandable: failed allocs", "perstream: frees of unknown pointers"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("table lacks %q", w)
		}
	}
	f, err := os.Open(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := report.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]float64{}
	var notes []string
	for _, s := range res.Suites {
		if s.Name == "replay" {
			for _, r := range s.Rows {
				rows[r.Case] = r.Ours.Median
			}
			notes = s.Notes
		}
	}
	// 128 small segments fit in 256 MiB: the other 2,872 requests fail.
	for _, mode := range []string{"plain", "expandable"} {
		if got := rows["perstream "+mode+": failed allocs"]; got != 3000-128 {
			t.Errorf("%s: %v failed allocations, want %d", mode, got, 3000-128)
		}
	}
	if got, ok := rows["perstream passthrough: failed allocs"]; !ok || got != 0 {
		t.Errorf("passthrough: %v failed allocations (row present %v), want 0", got, ok)
	}
	if got := rows["perstream: frees of unknown pointers"]; got != 2 {
		t.Errorf("%v unknown frees, want 2", got)
	}
	alive := regexp.MustCompile(`^perstream through (\w+): (\d+) driver streams created .*, at most (\d+) alive`)
	seen := map[string]int{}
	for _, n := range notes {
		if m := alive.FindStringSubmatch(n); m != nil {
			seen[m[1]], _ = strconv.Atoi(m[3])
		}
	}
	for _, mode := range []string{"plain", "expandable"} {
		// 128 streams hold memory; the others are destroyed once idle,
		// checked whenever the count doubles.
		if n, ok := seen[mode]; !ok || n > 2*128+minSweep {
			t.Errorf("%s: at most %d driver streams alive (note found: %v), want <= %d\nnotes: %q", mode, n, ok, 2*128+minSweep, notes)
		}
	}
	found := false
	for _, n := range notes {
		found = found || strings.Contains(n, "perstream through plain: 2872 of 3000 allocations failed") && strings.Contains(n, "out of memory")
	}
	if !found {
		t.Errorf("no note gives the first failure: %q", notes)
	}
}

// TestManyStreamsReplayBounded replays 4x the streams and checks that the
// driver streams alive at once do not grow with them: the replay's state
// follows the streams holding memory.
func TestManyStreamsReplayBounded(t *testing.T) {
	drv, err := driver.Open("sim", "capacity=64MiB")
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	dev, _ := drv.Device(0)
	env := &Env{Dev: dev}
	peak := map[string][2]int{}
	for _, conf := range []string{"", "expandable_segments:true"} {
		for i, n := range []int{1000, 4000} {
			for _, keep := range []bool{true, false} {
				ev := trace.ManyStreams(trace.StreamsParams{Streams: n, Size: 1024, Keep: keep})
				r, err := replayThrough(env, ev, conf)
				if err != nil {
					t.Fatal(err)
				}
				if r.streamsCreated < n {
					t.Fatalf("%d streams created for %d trace streams", r.streamsCreated, n)
				}
				k := fmt.Sprintf("conf %q keep %v", conf, keep)
				p := peak[k]
				p[i] = r.streamsPeak
				peak[k] = p
			}
		}
	}
	for k, p := range peak {
		t.Logf("%s: at most %d driver streams alive for 1000 trace streams, %d for 4000", k, p[0], p[1])
		// 32 small segments fit: at most 32 streams hold memory.
		if p[1] > 2*32+minSweep || p[1] > p[0]+minSweep {
			t.Errorf("%s: %d then %d driver streams alive at once", k, p[0], p[1])
		}
	}
}
