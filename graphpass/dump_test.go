package graphpass

import (
	"strings"
	"testing"

	gd "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

func TestAttrValueString(t *testing.T) {
	tests := []struct {
		v    AttrValue
		want string
	}{
		{AttrValue{Kind: AttrType, Type: DTInt32}, "int32"},
		{AttrValue{Kind: AttrType, Type: DTFloat + dtRefOffset}, "float_ref"},
		{AttrValue{Kind: AttrType, Type: 77}, "DataType(77)"},
		{AttrValue{Kind: AttrInt, I: -3}, "-3"},
		{AttrValue{Kind: AttrBool, B: true}, "true"},
		{AttrValue{Kind: AttrFloat, F: 0.5}, "0.5"},
		{AttrValue{Kind: AttrString, S: "a\"b"}, `"a\"b"`},
		{AttrValue{Kind: AttrShape, Shape: Shape{Dims: []int64{2, -1}}}, "[2,-1]"},
		{AttrValue{Kind: AttrShape, Shape: Shape{UnknownRank: true}}, "[?]"},
		{AttrValue{Kind: AttrTensor, Type: DTInt64, Shape: Shape{Dims: []int64{3}}}, "tensor<int64[3]>"},
		{AttrValue{Kind: AttrList, List: &List{Types: []DataType{DTInt32}, Ints: []int64{4}, Other: 2}}, "[int32,4,+2 more]"},
		{AttrValue{Kind: AttrPlaceholder, S: "T"}, "$T"},
		{AttrValue{Kind: AttrFunc, S: "f"}, "func f"},
		{AttrValue{}, "?"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestDump(t *testing.T) {
	g, err := Decode(gd.GraphDef(gd.Graph{Nodes: []gd.Node{
		gd.Const("k", "", gd.Int32, 2),
		gd.Op("a", "AddV2", "/device:GPU:0", gd.Int32, "k", "k:0", "^k"),
	}}))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := g.Dump(&b); err != nil {
		t.Fatal(err)
	}
	want := "k = Const() {dtype=int32, value=tensor<int32[2]>}\na = AddV2(k, k:0, ^k) @/device:GPU:0 {T=int32}\n"
	if b.String() != want {
		t.Errorf("dump:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestParseInput(t *testing.T) {
	for in, want := range map[string]Endpoint{
		"a":       {Node: "a"},
		"a:2":     {Node: "a", Port: 2},
		"^a":      {Node: "a", Control: true},
		"ns/a:10": {Node: "ns/a", Port: 10},
		"a:x":     {Node: "a:x"},
	} {
		if got := ParseInput(in); got != want {
			t.Errorf("ParseInput(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func TestModelSize(t *testing.T) {
	g, err := Decode(gd.Model(100_000))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("nodes=%d", len(g.Nodes()))
	if len(g.Nodes()) < 100_000 {
		t.Fatalf("%d nodes", len(g.Nodes()))
	}
}
