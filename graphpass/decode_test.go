package graphpass

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	gdtest "github.com/accelkit/accelkit/graphpass/graphpasstest"
	"google.golang.org/protobuf/encoding/protowire"
)

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
		// Large enough that its decoded structure outgrows allocSlack.
		{"too little memory per byte", gdtest.Model(200), Limits{MaxAllocPerByte: 1}, ErrLimit},
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

// FuzzDecode: any input either fails with ErrMalformed or ErrLimit, or
// round-trips byte for byte, reads the same from its bytes as decoded
// (checkScanners), is planned by PinHostCompute as the reference plan
// does (checkPlan), re-decodes after every device is changed, and, where
// protobuf-go accepts it, decodes with protobuf-go's generated types to the
// input with the new devices (checkWireEquivalent).
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
		checkScanners(t, g)
		checkPlan(t, newPin(t, PinOptions{}), g)
		for _, n := range g.Nodes() {
			n.SetDevice("/device:CPU:0")
		}
		checkWireEquivalent(t, data, g)
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

// TestDecodeLimitsInvalid: a negative limit is the caller's error, named
// with what is valid; it is neither ErrLimit nor ErrMalformed.
func TestDecodeLimitsInvalid(t *testing.T) {
	tests := []struct {
		lim   Limits
		field string
	}{
		{Limits{MaxBytes: -1}, "Limits.MaxBytes -1"},
		{Limits{MaxNodes: -2}, "Limits.MaxNodes -2"},
		{Limits{MaxAttrsPerNode: -3}, "Limits.MaxAttrsPerNode -3"},
		{Limits{MaxDepth: -4}, "Limits.MaxDepth -4"},
		{Limits{MaxAllocPerByte: -5}, "Limits.MaxAllocPerByte -5"},
	}
	for _, tt := range tests {
		_, err := DecodeLimits(sampleGraph(), tt.lim)
		if !errors.Is(err, ErrInvalidOption) || errors.Is(err, ErrLimit) || errors.Is(err, ErrMalformed) {
			t.Errorf("%+v: err = %v, want ErrInvalidOption alone", tt.lim, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.field) || !strings.Contains(msg, "want 0 (the default") {
			t.Errorf("%+v: %q does not name %q and what is valid", tt.lim, msg, tt.field)
		}
	}
}

// TestLimitsDefaults: zero fields take DefaultLimits, set fields are kept,
// and MaxBytes is capped at protobuf's 2 GiB limit.
func TestLimitsDefaults(t *testing.T) {
	got, err := Limits{}.withDefaults()
	if err != nil || got != DefaultLimits {
		t.Errorf("zero Limits: %+v, %v; want DefaultLimits %+v", got, err, DefaultLimits)
	}
	set := Limits{MaxBytes: 10, MaxNodes: 2, MaxAttrsPerNode: 3, MaxDepth: 4, MaxAllocPerByte: 5}
	if got, err := set.withDefaults(); err != nil || got != set {
		t.Errorf("set Limits: %+v, %v; want %+v", got, err, set)
	}
	if got, _ := (Limits{MaxBytes: math.MaxInt}).withDefaults(); got.MaxBytes != math.MaxInt32 {
		t.Errorf("MaxBytes MaxInt: %d, want %d", got.MaxBytes, math.MaxInt32)
	}
}
