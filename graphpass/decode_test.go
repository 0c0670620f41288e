package graphpass

import (
	"bytes"
	"errors"
	"testing"

	gdtest "github.com/accelkit/accelkit/graphpass/graphpasstest"
	"google.golang.org/protobuf/encoding/protowire"
)

func sampleGraph() []byte {
	unknownNodeField := protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "extra")
	unknownTop := protowire.AppendVarint(protowire.AppendTag(nil, 77, protowire.VarintType), 12345)
	return gdtest.GraphDef(gdtest.Graph{
		Library: []byte{0x0a, 0x03, 'f', 'o', 'o'},
		Nodes: []gdtest.Node{
			gdtest.Const("a", "/device:GPU:0", gdtest.Float, 1024, 1024),
			{Name: "s", Op: "Shape", Inputs: []string{"a"}, Device: "/device:GPU:0", Attrs: []gdtest.Attr{
				gdtest.A("T", gdtest.Type(gdtest.Float)), gdtest.A("out_type", gdtest.Type(gdtest.Int32))}},
			{Name: "n", Op: "ShapeN", Inputs: []string{"a", "a", "^s"}, Attrs: []gdtest.Attr{
				gdtest.A("N", gdtest.Int(2)), gdtest.A("types", gdtest.TypeList(gdtest.Int32, gdtest.Int64)),
				gdtest.A("f", gdtest.Func("fn", gdtest.A("x", gdtest.Int(3))))},
				Unknown: unknownNodeField},
			gdtest.Op("add", "AddV2", "", gdtest.Int32, "s", "n:1"),
		},
		Versions: gdtest.Versions(1645, 12),
		Unknown:  unknownTop,
	})
}

func TestDecodeFields(t *testing.T) {
	g, err := Decode(sampleGraph())
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Nodes()) != 4 {
		t.Fatalf("%d nodes", len(g.Nodes()))
	}
	a := g.Node("a")
	if a.Op() != "Const" || a.Device() != "/device:GPU:0" || a.TypeAttr("dtype") != DTFloat {
		t.Errorf("a = %q %q %v", a.Op(), a.Device(), a.TypeAttr("dtype"))
	}
	v, _ := a.Attr("value")
	if v.Kind != AttrTensor || v.Type != DTFloat || v.Shape.NumElements() != 1024*1024 {
		t.Errorf("a.value = %+v", v)
	}
	n := g.Node("n")
	if got := n.Inputs(); len(got) != 3 || got[2] != "^s" {
		t.Errorf("n inputs %q", got)
	}
	tl, _ := n.Attr("types")
	if tl.Kind != AttrList || len(tl.List.Types) != 2 || tl.List.Types[1] != DTInt64 {
		t.Errorf("n.types = %+v", tl)
	}
	f, _ := n.Attr("f")
	if f.Kind != AttrFunc || f.S != "fn" || len(*f.Func) != 1 || (*f.Func)[0].Value.I != 3 {
		t.Errorf("n.f = %+v", f)
	}
	if nn, _ := n.Attr("N"); nn.I != 2 {
		t.Errorf("N = %d", nn.I)
	}
	if g.Node("missing") != nil {
		t.Error("Node(missing) != nil")
	}
}

func TestRoundTripUnchanged(t *testing.T) {
	in := sampleGraph()
	g, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	g.Node("a").SetDevice("/device:GPU:0") // same value: not a change
	if out := g.Encode(); !bytes.Equal(out, in) {
		t.Fatal("unchanged graph does not round-trip byte for byte")
	}
}

// topFields splits a message into its top-level fields' bytes.
func topFields(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatal("bad tag")
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			t.Fatal("bad value")
		}
		out = append(out, b[:n+m])
		b = b[n+m:]
	}
	return out
}

func nodePayload(t *testing.T, field []byte) []byte {
	_, _, n := protowire.ConsumeTag(field)
	p, m := protowire.ConsumeBytes(field[n:])
	if m < 0 {
		t.Fatal("bad node")
	}
	return p
}

func TestChangeOnlyInsideNode(t *testing.T) {
	tests := []struct {
		node, device string
		wantDiffIdx  int // index of the NodeDef field expected to differ (-1: inserted)
	}{
		{"s", "/device:CPU:0", 3},    // replace in place (name, op, input, device, ...)
		{"add", "/device:CPU:0", -1}, // insert before attr
		{"s", "", -2},                // remove
		{"n", "/job:w/device:CPU:0", -1},
	}
	for _, tt := range tests {
		in := sampleGraph()
		g, err := Decode(in)
		if err != nil {
			t.Fatal(err)
		}
		g.Node(tt.node).SetDevice(tt.device)
		out := g.Encode()
		if bytes.Equal(in, out) {
			t.Fatalf("%s: no change", tt.node)
		}
		inF, outF := topFields(t, in), topFields(t, out)
		if len(inF) != len(outF) {
			t.Fatalf("%s: %d top fields, want %d", tt.node, len(outF), len(inF))
		}
		changedIdx := 1 + map[string]int{"a": 0, "s": 1, "n": 2, "add": 3}[tt.node] // library first
		for i := range inF {
			if i == changedIdx {
				continue
			}
			if !bytes.Equal(inF[i], outF[i]) {
				t.Errorf("%s: top field %d changed", tt.node, i)
			}
		}
		// Inside the changed node, only the device field differs.
		a, b := topFields(t, nodePayload(t, inF[changedIdx])), topFields(t, nodePayload(t, outF[changedIdx]))
		var ka, kb [][]byte
		for _, f := range a {
			if num, _, _ := protowire.ConsumeTag(f); num != fNodeDevice {
				ka = append(ka, f)
			}
		}
		for _, f := range b {
			if num, _, _ := protowire.ConsumeTag(f); num != fNodeDevice {
				kb = append(kb, f)
			}
		}
		if len(ka) != len(kb) {
			t.Fatalf("%s: non-device field count changed", tt.node)
		}
		for i := range ka {
			if !bytes.Equal(ka[i], kb[i]) {
				t.Errorf("%s: non-device field %d changed", tt.node, i)
			}
		}
		if tt.wantDiffIdx >= 0 {
			for i := range tt.wantDiffIdx {
				if !bytes.Equal(a[i], b[i]) {
					t.Errorf("%s: field %d before device changed", tt.node, i)
				}
			}
			if len(a) != len(b) {
				t.Errorf("%s: in-place replace changed the field count", tt.node)
			}
		}
		// Field order stays canonical: device (4) before attr (5).
		prev := protowire.Number(0)
		for _, f := range b {
			num, _, _ := protowire.ConsumeTag(f)
			if num < prev && num <= fNodeAttr {
				t.Errorf("%s: field %d after %d", tt.node, num, prev)
			}
			prev = num
		}
		g2, err := Decode(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := g2.Node(tt.node).Device(); got != tt.device {
			t.Errorf("%s: device after round trip %q, want %q", tt.node, got, tt.device)
		}
		// Re-encoding the decoded output is byte-identical.
		if !bytes.Equal(g2.Encode(), out) {
			t.Errorf("%s: second round trip differs", tt.node)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	valid := sampleGraph()
	// Deep func nesting.
	deep := gdtest.Int(1)
	for range 100 {
		deep = gdtest.Func("f", gdtest.A("x", deep))
	}
	deepGraph := gdtest.GraphDef(gdtest.Graph{Nodes: []gdtest.Node{{Name: "x", Op: "Call", Attrs: []gdtest.Attr{gdtest.A("f", deep)}}}})
	// Deeply nested groups in an unknown field: protowire's recursion limit.
	var groups []byte
	for range 20000 {
		groups = protowire.AppendTag(groups, 50, protowire.StartGroupType)
	}
	for range 20000 {
		groups = protowire.AppendTag(groups, 50, protowire.EndGroupType)
	}
	tests := []struct {
		name string
		in   []byte
		lim  Limits
		want error
	}{
		{"deep groups", groups, Limits{}, ErrMalformed},
		{"truncated", valid[:len(valid)-3], Limits{}, ErrMalformed},
		{"huge length", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01}, Limits{}, ErrMalformed},
		{"node as varint", []byte{0x08, 0x01}, Limits{}, ErrMalformed},
		{"bad tag", []byte{0x00}, Limits{}, ErrMalformed},
		{"node name as varint", gdtest.GraphDef(gdtest.Graph{Nodes: []gdtest.Node{{Unknown: []byte{0x08, 0x01}}}}), Limits{}, ErrMalformed},
		{"deep nesting", deepGraph, Limits{}, ErrLimit},
		{"too big", valid, Limits{MaxBytes: 10}, ErrLimit},
		{"too many nodes", valid, Limits{MaxNodes: 2}, ErrLimit},
		{"too many attrs", valid, Limits{MaxAttrsPerNode: 1}, ErrLimit},
		{"too little memory per byte", valid, Limits{MaxAllocPerByte: 1}, ErrLimit},
		{"packed list overrun", gdtest.GraphDef(gdtest.Graph{Nodes: []gdtest.Node{{Name: "x", Attrs: []gdtest.Attr{gdtest.A("l", []byte{0x0a, 0x03, 0x32, 0x01, 0xff})}}}}), Limits{}, ErrMalformed},
	}
	for _, tt := range tests {
		_, err := DecodeLimits(tt.in, tt.lim)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := DecodeLimits(deepGraph, Limits{MaxDepth: 200}); err != nil {
		t.Errorf("deep graph within a raised limit: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(sampleGraph())
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00})
	f.Add(gdtest.GraphDef(gdtest.Graph{Nodes: []gdtest.Node{gdtest.Op("x", "AddV2", "/device:GPU:0", gdtest.Int32, "a", "b:1", "^c")}}))
	for _, in := range pathologicalInputs(64) {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := DecodeLimits(data, Limits{MaxDepth: 8})
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrLimit) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if !bytes.Equal(g.Encode(), data) {
			t.Fatal("round trip differs")
		}
		for _, n := range g.Nodes() {
			n.SetDevice("/device:CPU:0")
		}
		out := g.Encode()
		g2, err := DecodeLimits(out, Limits{MaxDepth: 8})
		if err != nil {
			t.Fatalf("re-decode after SetDevice: %v", err)
		}
		if len(g2.Nodes()) != len(g.Nodes()) {
			t.Fatal("node count changed")
		}
		for i, n := range g2.Nodes() {
			if n.Device() != "/device:CPU:0" || n.Name() != g.Nodes()[i].Name() {
				t.Fatalf("node %d: %q on %q", i, n.Name(), n.Device())
			}
		}
	})
}
