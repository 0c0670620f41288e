// Package pickletest checks devalloc's snapshot pickles from the outside,
// for the tests of memsnap (the encoder) and devalloc (live snapshots):
// Unpickle, a decoder of our own written apart from the encoder, and
// RunPython, which has Python's pickle load them. It is test support,
// internal to the devalloc module.
package pickletest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"testing"
)

// Pickle opcodes (Python's Lib/pickletools.py names them), spelt out
// again here so that the decoder does not share the encoder's table.
const (
	opProto      = 0x80
	opStop       = '.'
	opMark       = '('
	opEmptyDict  = '}'
	opEmptyList  = ']'
	opSetItem    = 's'
	opSetItems   = 'u'
	opAppend     = 'a'
	opAppends    = 'e'
	opTuple2     = 0x86
	opBinUnicode = 'X'
	opBinInt1    = 'K'
	opBinInt2    = 'M'
	opBinInt     = 'J'
	opLong1      = 0x8a
	opBinFloat   = 'G'
	opNewTrue    = 0x88
	opNewFalse   = 0x89
)

// Unpickle is a decoder for the opcodes WritePickle uses: dicts
// decode to map[string]any, lists and tuples to []any, ints to int64 (or
// uint64 above MaxInt64), floats to float64. It refuses any other opcode,
// so a stray one in the encoder fails the tests.
func Unpickle(data []byte) (any, error) {
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
			if data[i] != 2 { // WritePickle writes protocol 2
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

// DerefLists turns the decoder's *[]any into []any throughout.
func DerefLists(v any) any {
	switch x := v.(type) {
	case *[]any:
		return DerefLists(*x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = DerefLists(e)
		}
		return out
	case map[string]any:
		for k, e := range x {
			x[k] = DerefLists(e)
		}
	}
	return v
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

// RunPython runs pythonCheck on pairs of (pickle, JSON) paths and
// returns how many of the pickles Python's own pickler reproduced byte for
// byte (those whose strings Python does not share).
func RunPython(t testing.TB, live bool, paths ...string) int {
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
