package memsnap

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/devalloc/internal/pickletest"
	"github.com/accelkit/accelkit/driver"
)

// pickleShape turns the JSON of a snapshot, decoded with UseNumber, into
// the value WritePickle's documentation promises: the same data with
// PyTorch's key set.
func pickleShape(t testing.TB, v any) any {
	t.Helper()
	top := v.(map[string]any)
	frames := func(m map[string]any) {
		if _, ok := m["frames"]; !ok {
			m["frames"] = []any{}
		}
	}
	for _, s := range top["segments"].([]any) {
		seg := s.(map[string]any)
		seg["segment_pool_id"] = []any{int64(0), int64(0)}
		seg["frames"] = []any{}
		for _, b := range seg["blocks"].([]any) {
			frames(b.(map[string]any))
		}
	}
	for _, tr := range top["device_traces"].([]any) {
		for _, e := range tr.([]any) {
			m := e.(map[string]any)
			frames(m)
			if m["action"] == ActionOOM {
				if _, ok := m["device_free"]; !ok {
					m["device_free"] = json.Number("0")
				}
				delete(m, "addr")
			}
		}
	}
	st := top["allocator_settings"].(map[string]any)
	divs := map[string]any{}
	for i, d := range st["roundup_power2_divisions"].([]any) {
		divs[strconv.Itoa(1<<i)] = d
	}
	st["roundup_power2_divisions"] = divs
	return numbers(t, v)
}

// numbers turns json.Number into int64, uint64 or float64 as the pickle
// decoder would produce them.
func numbers(t testing.TB, v any) any {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if strings.ContainsAny(s, ".eE") {
			f, err := x.Float64()
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i
		}
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return u
	case []any:
		for i, e := range x {
			x[i] = numbers(t, e)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(t, e)
		}
	}
	return v
}

// checkPickleMatchesJSON decodes s's pickle with unpickle and compares it
// with s's JSON in the pickle's shape.
func checkPickleMatchesJSON(t testing.TB, s *Snapshot) {
	t.Helper()
	var pk, js bytes.Buffer
	if err := s.WritePickle(&pk); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	got, err := pickletest.Unpickle(pk.Bytes())
	if err != nil {
		t.Fatalf("decode our pickle: %v", err)
	}
	got = pickletest.DerefLists(got)
	dec := json.NewDecoder(&js)
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		t.Fatal(err)
	}
	want = pickleShape(t, want)
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("pickle and JSON differ:\npickle %.2000s\njson   %.2000s", gj, wj)
	}
}

// actionNames are the trace actions, every one of which randSnapshot
// writes.
var actionNames = []string{ActionAlloc, ActionFreeRequested, ActionFreeCompleted, ActionSegmentAlloc,
	ActionSegmentFree, ActionSegmentMap, ActionSegmentUnmap, ActionOOM}

// edgeInts are the boundaries of the pickle integer opcodes.
var edgeInts = []uint64{0, 1, 0xff, 0x100, 0xffff, 0x10000, math.MaxInt32, math.MaxInt32 + 1, math.MaxUint32,
	1 << 40, math.MaxInt64, math.MaxInt64 + 1, 1<<63 + 12345, math.MaxUint64}

// randSnapshot builds a snapshot that exercises the encoder: edge
// integers, negative times and stats, long, non-ASCII and invalid UTF-8
// strings, and, when big, a trace longer than a pickle batch.
func randSnapshot(r *rand.Rand, big bool) *Snapshot {
	u := func() uint64 {
		if r.IntN(3) == 0 {
			return edgeInts[r.IntN(len(edgeInts))]
		}
		return r.Uint64() >> r.IntN(64)
	}
	i64 := func() int64 { return int64(u()) }
	strs := []string{"large", "héllo wörld ✓", "bad \xff\xfe utf8 \xc3", strings.Repeat("long", 100), "\x00nul", "", "x"}
	if big {
		// No empty or one-character strings: Python shares those, so its
		// pickler would write memo references and the byte-for-byte check
		// of pythonCheck would not run on the long batches.
		strs = strs[:len(strs)-2]
	}
	str := func() string { return strs[r.IntN(len(strs))] }
	frames := func() []Frame {
		var fs []Frame
		for range r.IntN(3) {
			fs = append(fs, Frame{Filename: str(), Line: r.IntN(1 << 20), Name: str()})
		}
		return fs
	}
	s := &Snapshot{Segments: []SegmentInfo{}, Stats: map[string]int64{}}
	for range r.IntN(4) {
		seg := SegmentInfo{Device: r.IntN(8), Address: u(), TotalSize: u(), AllocatedSize: u(), ActiveSize: u(),
			RequestedSize: u(), Stream: u(), SegmentType: str(), IsExpandable: r.IntN(2) == 0, Blocks: []BlockInfo{}}
		for range r.IntN(4) {
			seg.Blocks = append(seg.Blocks, BlockInfo{Address: u(), Size: u(), RequestedSize: u(), State: str(), Frames: frames()})
		}
		s.Segments = append(s.Segments, seg)
	}
	for range 1 + r.IntN(3) {
		n := r.IntN(5)
		if big {
			n = pickleBatch + 1 + r.IntN(10)
		}
		tr := []TraceEntry{}
		for range n {
			e := TraceEntry{Action: actionNames[r.IntN(len(actionNames))], Addr: u(), Size: u(), Stream: u(), TimeUS: i64(), Frames: frames()}
			if e.Action == ActionOOM {
				e.Addr, e.DeviceFree = 0, u()
			}
			tr = append(tr, e)
		}
		s.DeviceTraces = append(s.DeviceTraces, tr)
	}
	for range r.IntN(6) {
		s.Stats[str()+strconv.Itoa(r.IntN(100))] = i64()
	}
	s.Allocator = AllocatorSettings{Conf: str(), MaxSplitSize: i64(), GarbageCollectionThreshold: r.Float64(),
		ExpandableSegments: r.IntN(2) == 0, RoundupPower2Divisions: make([]int64, 16), // devalloc.RoundupIntervals
		Config: str(), Backend: str(), Schema: str()}
	for i := range s.Allocator.RoundupPower2Divisions {
		s.Allocator.RoundupPower2Divisions[i] = i64()
	}
	s.Device = DeviceInfo{Device: r.IntN(8), TotalMemory: u(), FreeMemory: u(), ExpandableRequested: r.IntN(2) == 0,
		VMMAvailable: r.IntN(2) == 0, ExpandableInUse: r.IntN(2) == 0, VMMGranularity: u()}
	return s
}

// TestPickleRoundTrip: random snapshots decode, with the test decoder, to
// their JSON in the pickle's shape.
func TestPickleRoundTrip(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 27))
		checkPickleMatchesJSON(t, randSnapshot(r, seed%50 == 0))
	}
}

func FuzzPickleSnapshot(f *testing.F) {
	f.Add(uint64(0), false)
	f.Add(uint64(1), true)
	f.Add(uint64(math.MaxUint64), false)
	f.Fuzz(func(t *testing.T, seed uint64, big bool) {
		checkPickleMatchesJSON(t, randSnapshot(rand.New(rand.NewPCG(seed, seed>>7)), big))
	})
}

// TestPickleIntEncoding pins the integer opcodes to Python's choices.
func TestPickleIntEncoding(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want string
	}{
		{0, "K\x00"}, {255, "K\xff"}, {256, "M\x00\x01"}, {65535, "M\xff\xff"}, {65536, "J\x00\x00\x01\x00"},
		{-1, "J\xff\xff\xff\xff"}, {math.MaxInt32, "J\xff\xff\xff\x7f"}, {math.MinInt32, "J\x00\x00\x00\x80"},
		{math.MaxInt32 + 1, "\x8a\x05\x00\x00\x00\x80\x00"}, {math.MinInt32 - 1, "\x8a\x05\xff\xff\xff\x7f\xff"},
		{math.MaxInt64, "\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f"}, {math.MinInt64, "\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80"},
	} {
		var b bytes.Buffer
		p := &pickler{w: bufio.NewWriter(&b), maxStr: maxPickleString}
		p.int(tc.v)
		_ = p.w.Flush()
		if b.String() != tc.want {
			t.Errorf("int(%d) = %q, want %q", tc.v, b.String(), tc.want)
		}
	}
	var b bytes.Buffer
	p := &pickler{w: bufio.NewWriter(&b), maxStr: maxPickleString}
	p.uint(math.MaxUint64)
	_ = p.w.Flush()
	if want := "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00"; b.String() != want {
		t.Errorf("uint(MaxUint64) = %q, want %q", b.String(), want)
	}
}

// TestPicklePythonRandom has Python load random snapshots (edge integers,
// odd strings, traces longer than a batch) and compare them with their
// JSON.
func TestPicklePythonRandom(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for seed := range uint64(8) {
		s := randSnapshot(rand.New(rand.NewPCG(seed, 99)), seed == 3)
		base := filepath.Join(dir, fmt.Sprintf("r%d", seed))
		for _, w := range []struct {
			ext   string
			write func(*bytes.Buffer) error
		}{{".pickle", func(b *bytes.Buffer) error { return s.WritePickle(b) }}, {".json", func(b *bytes.Buffer) error { return s.WriteJSON(b) }}} {
			var b bytes.Buffer
			if err := w.write(&b); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(base+w.ext, b.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, base+w.ext)
		}
	}
	if exact := pickletest.RunPython(t, false, paths...); exact == 0 {
		t.Errorf("Python's pickler reproduced none of the random pickles byte for byte, the long-batch one included")
	}
}

// failWriter fails every write after n bytes.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWritePickleWriteError(t *testing.T) {
	s := randSnapshot(rand.New(rand.NewPCG(3, 3)), true)
	for _, n := range []int{0, 100, 70000} {
		if err := s.WritePickle(&failWriter{n: n}); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("after %d bytes: WritePickle = %v, want the writer's error", n, err)
		}
	}
}

// TestPickleRefusesLongString: a string longer than BINUNICODE's 32-bit
// length would have its length wrap and its tail read as opcodes (a
// pickle that ran os.system when loaded). It is refused, before or after
// invalid UTF-8 is replaced, and the partial pickle has no STOP. The
// bound is lowered through writePickle so that no 4 GiB string is made.
func TestPickleRefusesLongString(t *testing.T) {
	if maxPickleString != 1<<32-1 {
		t.Fatalf("maxPickleString = %d, want BINUNICODE's 2^32-1", uint64(maxPickleString))
	}
	// Longer than every key; its tail is what a wrapped length would run.
	payload := strings.Repeat("x", 40) + "cos\nsystem\n(S'true'\ntR."
	bad := strings.Repeat("\xff", 20) // 60 bytes as U+FFFD
	for _, tc := range []struct {
		name, s string
		max     uint64
		ok      bool
	}{
		{"fits", payload, uint64(len(payload)), true},
		{"one byte over", payload, uint64(len(payload)) - 1, false},
		{"over after U+FFFD replacement", bad, 59, false},
		{"replacement fits", bad, 60, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Snapshot{Segments: []SegmentInfo{{Blocks: []BlockInfo{{State: StateActiveAllocated,
				Frames: []Frame{{Filename: tc.s, Name: "f"}}}}}}, DeviceTraces: [][]TraceEntry{{}}}
			var buf bytes.Buffer
			err := s.writePickle(&buf, tc.max)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := pickletest.Unpickle(buf.Bytes()); err != nil {
					t.Fatalf("our decoder: %v", err)
				}
				return
			}
			if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "BINUNICODE") ||
				!strings.Contains(err.Error(), fmt.Sprintf("(%d bytes", tc.max)) {
				t.Fatalf("err = %v; want ErrInvalidValue naming the %d-byte limit and BINUNICODE", err, tc.max)
			}
			if b := buf.Bytes(); bytes.Contains(b, []byte(tc.s)) || len(b) > 0 && b[len(b)-1] == opStop {
				t.Errorf("the refused string or a STOP was written: %q", b)
			}
			if _, err := pickletest.Unpickle(buf.Bytes()); err == nil {
				t.Errorf("the partial pickle decodes")
			}
		})
	}
}
