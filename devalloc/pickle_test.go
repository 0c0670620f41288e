package devalloc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// unpickle is a test-only decoder for the opcodes WritePickle uses: dicts
// decode to map[string]any, lists and tuples to []any, ints to int64 (or
// uint64 above MaxInt64), floats to float64. It refuses any other opcode,
// so a stray one in the encoder fails the tests.
func unpickle(data []byte) (any, error) {
	var stack []any
	var marks []int
	pop := func() any { v := stack[len(stack)-1]; stack = stack[:len(stack)-1]; return v }
	need := func(i, n int) error {
		if i+n > len(data) {
			return fmt.Errorf("truncated at %d", i)
		}
		return nil
	}
	for i := 0; i < len(data); {
		op := data[i]
		i++
		switch op {
		case opProto:
			if err := need(i, 1); err != nil {
				return nil, err
			}
			if data[i] != pickleProtocol {
				return nil, fmt.Errorf("protocol %d", data[i])
			}
			i++
		case opStop:
			if len(stack) != 1 || len(marks) != 0 || i != len(data) {
				return nil, fmt.Errorf("STOP with %d values, %d marks, %d bytes left", len(stack), len(marks), len(data)-i)
			}
			return stack[0], nil
		case opMark:
			marks = append(marks, len(stack))
		case opEmptyDict:
			stack = append(stack, map[string]any{})
		case opEmptyList:
			stack = append(stack, &[]any{})
		case opSetItem, opSetItems:
			from := len(stack) - 2
			if op == opSetItems {
				from, marks = marks[len(marks)-1], marks[:len(marks)-1]
			}
			d, ok := stack[from-1].(map[string]any)
			if !ok || (len(stack)-from)%2 != 0 {
				return nil, fmt.Errorf("SETITEM(S) at %d: not a dict or odd items", i-1)
			}
			for j := from; j < len(stack); j += 2 {
				d[stack[j].(string)] = stack[j+1]
			}
			stack = stack[:from]
		case opAppend, opAppends:
			from := len(stack) - 1
			if op == opAppends {
				from, marks = marks[len(marks)-1], marks[:len(marks)-1]
			}
			l, ok := stack[from-1].(*[]any)
			if !ok {
				return nil, fmt.Errorf("APPEND(S) at %d: not a list", i-1)
			}
			*l = append(*l, stack[from:]...)
			stack = stack[:from]
		case opTuple2:
			b, a := pop(), pop()
			stack = append(stack, []any{a, b})
		case opBinUnicode:
			if err := need(i, 4); err != nil {
				return nil, err
			}
			n := int(binary.LittleEndian.Uint32(data[i:]))
			i += 4
			if err := need(i, n); err != nil {
				return nil, err
			}
			stack = append(stack, string(data[i:i+n]))
			i += n
		case opBinInt1:
			if err := need(i, 1); err != nil {
				return nil, err
			}
			stack = append(stack, int64(data[i]))
			i++
		case opBinInt2:
			if err := need(i, 2); err != nil {
				return nil, err
			}
			stack = append(stack, int64(binary.LittleEndian.Uint16(data[i:])))
			i += 2
		case opBinInt:
			if err := need(i, 4); err != nil {
				return nil, err
			}
			stack = append(stack, int64(int32(binary.LittleEndian.Uint32(data[i:]))))
			i += 4
		case opLong1:
			if err := need(i, 1); err != nil {
				return nil, err
			}
			n := int(data[i])
			i++
			if err := need(i, n); err != nil || n > 9 {
				return nil, fmt.Errorf("LONG1 of %d bytes at %d", n, i)
			}
			var b [9]byte
			copy(b[:], data[i:i+n])
			if n > 0 && data[i+n-1]&0x80 != 0 {
				for j := n; j < 9; j++ {
					b[j] = 0xff
				}
			}
			switch v := binary.LittleEndian.Uint64(b[:8]); {
			case b[8] == 0 && v > math.MaxInt64:
				stack = append(stack, v)
			case b[8] == 0 || b[8] == 0xff && v > math.MaxInt64:
				stack = append(stack, int64(v))
			default:
				return nil, fmt.Errorf("LONG1 out of 64-bit range at %d", i)
			}
			i += n
		case opBinFloat:
			if err := need(i, 8); err != nil {
				return nil, err
			}
			stack = append(stack, math.Float64frombits(binary.BigEndian.Uint64(data[i:])))
			i += 8
		case opNewTrue:
			stack = append(stack, true)
		case opNewFalse:
			stack = append(stack, false)
		default:
			return nil, fmt.Errorf("opcode %#x at %d: not one WritePickle uses", op, i-1)
		}
	}
	return nil, errors.New("no STOP")
}

// derefLists turns the decoder's *[]any into []any throughout.
func derefLists(v any) any {
	switch x := v.(type) {
	case *[]any:
		return derefLists(*x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = derefLists(e)
		}
		return out
	case map[string]any:
		for k, e := range x {
			x[k] = derefLists(e)
		}
	}
	return v
}

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
	got, err := unpickle(pk.Bytes())
	if err != nil {
		t.Fatalf("decode our pickle: %v", err)
	}
	got = derefLists(got)
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
		ExpandableSegments: r.IntN(2) == 0, RoundupPower2Divisions: make([]int64, RoundupIntervals),
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

// pythonCheck is run by python3 on snapshot files: argv holds pairs of
// pickle and JSON paths. For each pair it checks the pickle field by field
// against PyTorch's documented snapshot schema (torch.cuda.memory._snapshot
// docstring, the keys torch/cuda/_memory_viz.py and MemoryViz.js read),
// that it holds the JSON's data in the pickle's shape, that it uses only
// protocol-2 opcodes, and that Python's own pickler writes the same bytes
// for the loaded object (pickletools.optimize drops its memo opcodes).
// live=1 in the environment also checks what only a live allocator's
// snapshot guarantees: block sizes add up to their segment as
// _memory_viz.segsum asserts.
const pythonCheck = `
import json, os, pickle, pickletools, sys

def check(pk_path, js_path):
    data = open(pk_path, "rb").read()
    snap = pickle.loads(data)
    js = json.load(open(js_path))
    assert max(op.proto for op, _, _ in pickletools.genops(data)) <= 2, "opcode above protocol 2"
    assert data[:2] == b"\x80\x02", data[:2]
    mine = pickletools.optimize(pickle.dumps(snap, protocol=2))
    shared = any(op.name in ("BINGET", "LONG_BINGET") for op, _, _ in pickletools.genops(mine))
    assert shared or mine == data, "Python pickles the loaded object differently"
    exact.append(not shared)
    assert type(snap) is dict
    for k in ("segments", "device_traces", "allocator_settings"):
        assert k in snap, k
    def frames(fs):
        assert type(fs) is list
        for f in fs:
            assert type(f) is dict and set(f) == {"filename", "line", "name"}, f
            assert type(f["filename"]) is str and type(f["line"]) is int and type(f["name"]) is str
    segkeys = {"device": int, "address": int, "total_size": int, "allocated_size": int, "active_size": int,
               "requested_size": int, "stream": int, "segment_type": str, "segment_pool_id": tuple,
               "is_expandable": bool, "frames": list, "blocks": list}
    blockkeys = {"address": int, "size": int, "requested_size": int, "state": str, "frames": list}
    live = os.environ.get("live") == "1"
    for seg, jseg in zip(snap["segments"], js["segments"], strict=True):
        assert set(seg) == set(segkeys), set(seg) ^ set(segkeys)
        for k, ty in segkeys.items():
            assert type(seg[k]) is ty, (k, type(seg[k]))
        assert seg["segment_pool_id"] == (0, 0)
        frames(seg["frames"])
        for k in jseg:
            if k != "blocks":
                assert seg[k] == jseg[k], (k, seg[k], jseg[k])
        addr = seg["address"]
        for b, jb in zip(seg["blocks"], jseg["blocks"], strict=True):
            assert set(b) == set(blockkeys), set(b)
            for k, ty in blockkeys.items():
                assert type(b[k]) is ty, (k, type(b[k]))
            frames(b["frames"])
            for k in jb:
                assert b[k] == jb[k], (k, b[k], jb[k])
            if live:
                assert b["state"] in ("active_allocated", "active_pending_free", "inactive"), b["state"]
                assert b["address"] == addr, (b["address"], addr)
                assert b["requested_size"] <= b["size"]
                addr += b["size"]
        if live:
            assert seg["segment_type"] in ("small", "large")
            assert addr == seg["address"] + seg["total_size"], "blocks do not cover the segment"
            assert seg["allocated_size"] == sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
    assert type(snap["device_traces"]) is list
    for tr, jtr in zip(snap["device_traces"], js["device_traces"], strict=True):
        assert type(tr) is list
        for e, je in zip(tr, jtr, strict=True):
            want = {"action", "size", "stream", "time_us", "frames"} | ({"device_free"} if e["action"] == "oom" else {"addr"})
            assert set(e) == want, (set(e), want)
            for k in want - {"frames", "action"}:
                assert type(e[k]) is int, (k, type(e[k]))
            assert type(e["action"]) is str
            frames(e["frames"])
            assert e["frames"] == je.get("frames", [])
            for k in want - {"frames"}:
                assert e[k] == je.get(k, 0), (k, e[k], je.get(k))
    st = snap["allocator_settings"]
    for k, ty in {"PYTORCH_CUDA_ALLOC_CONF": str, "max_split_size": int, "garbage_collection_threshold": float,
                  "expandable_segments": bool, "roundup_power2_divisions": dict}.items():
        assert type(st[k]) is ty, (k, type(st[k]))
    jst = js["allocator_settings"]
    assert [st["roundup_power2_divisions"][str(1 << i)] for i in range(len(jst["roundup_power2_divisions"]))] == jst["roundup_power2_divisions"]
    for k in jst:
        if k != "roundup_power2_divisions":
            assert st[k] == jst[k], (k, st[k], jst[k])
    assert snap["stats"] == js["stats"] and all(type(v) is int for v in snap["stats"].values())
    assert snap["device_info"] == js["device_info"]

exact = []
args = sys.argv[1:]
for i in range(0, len(args), 2):
    check(args[i], args[i + 1])
print("checked", len(args) // 2, "byte-for-byte", sum(exact))
`

// runPythonCheck runs pythonCheck on pairs of (pickle, JSON) paths and
// returns how many of the pickles Python's own pickler reproduced byte for
// byte (those whose strings Python does not share).
func runPythonCheck(t *testing.T, live bool, paths ...string) int {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("ACCELKIT_REQUIRE_PYTHON") != "" {
			t.Fatal("ACCELKIT_REQUIRE_PYTHON is set but no python3 is installed")
		}
		t.Skip("python3 is not installed: the pickle is checked by the Go decoder tests only")
	}
	cmd := exec.Command(py, append([]string{"-c", pythonCheck}, paths...)...)
	cmd.Env = append(os.Environ(), "live=0")
	if live {
		cmd.Env = append(os.Environ(), "live=1")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 check failed: %v\n%s", err, out)
	}
	var checked, exact int
	if _, err := fmt.Sscanf(string(out), "checked %d byte-for-byte %d", &checked, &exact); err != nil || checked != len(paths)/2 {
		t.Fatalf("python3 printed %q, want \"checked %d byte-for-byte N\"", out, len(paths)/2)
	}
	t.Logf("python3: %s", bytes.TrimSpace(out))
	return exact
}

// TestWriteSnapshotPicklePython writes a live allocator's snapshot with
// WriteSnapshot and has Python's pickle load the .pickle beside the JSON
// and check it against PyTorch's schema and the JSON.
func TestWriteSnapshotPicklePython(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	ss := streams(t, dev, 2)
	a := newAlloc(t, dev, "history_entries:256,history_stacks:true,max_split_size_mb:32,garbage_collection_threshold:0.9")
	p := mustAlloc(t, a, 4*kib, ss[0])
	q := mustAlloc(t, a, 3*mib, ss[0])
	r := mustAlloc(t, a, 700, ss[1])
	// The OOM path waits for pending frees: the OOM before the gate.
	if _, err := a.Alloc(200*mib, ss[0]); !IsOOM(err) {
		t.Fatalf("want OOM, got %v", err)
	}
	if err := a.RecordStream(q, ss[1]); err != nil {
		t.Fatal(err)
	}
	open := gate(t, dev, ss[1])
	mustFree(t, a, q) // pending until the gate opens
	dir := t.TempDir()
	path := filepath.Join(dir, "snap.json")
	if err := a.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	open()
	mustFree(t, a, p)
	mustFree(t, a, r)
	pp := filepath.Join(dir, "snap.pickle")
	if PicklePath(path) != pp {
		t.Fatalf("PicklePath(%q) = %q, want %q", path, PicklePath(path), pp)
	}
	data, err := os.ReadFile(pp)
	if err != nil {
		t.Fatalf("no pickle beside the JSON: %v", err)
	}
	// The Go side too: the live snapshot has stacks on blocks, a pending
	// block and an oom entry, so every shape rule is exercised.
	got, err := unpickle(data)
	if err != nil {
		t.Fatal(err)
	}
	top := derefLists(got).(map[string]any)
	var oom, blockFrames bool
	for _, e := range top["device_traces"].([]any)[0].([]any) {
		if m := e.(map[string]any); m["action"] == ActionOOM {
			_, hasAddr := m["addr"]
			oom = !hasAddr && m["device_free"].(int64) > 0
		}
	}
	for _, s := range top["segments"].([]any) {
		for _, b := range s.(map[string]any)["blocks"].([]any) {
			if bm := b.(map[string]any); bm["state"] != StateInactive && len(bm["frames"].([]any)) > 0 {
				blockFrames = true
			}
		}
	}
	if !oom || !blockFrames {
		t.Errorf("pickle lacks an oom entry with device_free (%v) or block frames (%v)", oom, blockFrames)
	}
	if exact := runPythonCheck(t, true, pp, path); exact != 1 {
		t.Errorf("Python's pickler did not reproduce the live snapshot's pickle byte for byte")
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
	if exact := runPythonCheck(t, false, paths...); exact == 0 {
		t.Errorf("Python's pickler reproduced none of the random pickles byte for byte, the long-batch one included")
	}
}

func TestWriteSnapshotRefusesPicklePath(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, "")
	path := filepath.Join(t.TempDir(), "snap.pickle")
	err := a.WriteSnapshot(path)
	if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "snap.pickle") {
		t.Fatalf("WriteSnapshot(%q) = %v, want an error naming it", path, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a file was written at %s", path)
	}
	for in, want := range map[string]string{"a/s.json": "a/s.pickle", "a/s": "a/s.pickle", "a.b/s": "a.b/s.pickle", "s.tar.gz": "s.tar.pickle"} {
		if got := PicklePath(in); got != want {
			t.Errorf("PicklePath(%q) = %q, want %q", in, got, want)
		}
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
				if _, err := unpickle(buf.Bytes()); err != nil {
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
			if _, err := unpickle(buf.Bytes()); err == nil {
				t.Errorf("the partial pickle decodes")
			}
		})
	}
}
