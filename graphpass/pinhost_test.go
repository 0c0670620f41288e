package graphpass

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	gd "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

const (
	gpu = "/device:GPU:0"
	cpu = "/device:CPU:0"
)

// newPin returns NewPinHostCompute(opts), failing tb on an error.
func newPin(tb testing.TB, opts PinOptions) *PinHostCompute {
	tb.Helper()
	p, err := NewPinHostCompute(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func runPin(t *testing.T, nodes []gd.Node, opts PinOptions) (*Graph, Stats) {
	t.Helper()
	g, err := Decode(gd.GraphDef(gd.Graph{Nodes: nodes, Versions: gd.Versions(1, 0)}))
	if err != nil {
		t.Fatal(err)
	}
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	p := newPin(t, opts)
	checkPlan(t, p, g)
	var st Stats
	if err := p.Run(g, &st); err != nil {
		t.Fatal(err)
	}
	return g, st
}

func devices(g *Graph) map[string]string {
	m := map[string]string{}
	for _, n := range g.Nodes() {
		m[n.Name()] = n.Device()
	}
	return m
}

func expectDevices(t *testing.T, g *Graph, want map[string]string) {
	t.Helper()
	got := devices(g)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s on %q, want %q", name, got[name], w)
		}
	}
}

func shape(name, dev string, in string) gd.Node {
	return gd.Node{Name: name, Op: "Shape", Device: dev, Inputs: []string{in},
		Attrs: []gd.Attr{gd.A("T", gd.Type(gd.Float)), gd.A("out_type", gd.Type(gd.Int32))}}
}

func prod(name, dev string, t int, in ...string) gd.Node {
	return gd.Node{Name: name, Op: "Prod", Device: dev, Inputs: in, Attrs: []gd.Attr{
		gd.A("T", gd.Type(t)), gd.A("Tidx", gd.Type(gd.Int32)), gd.A("keep_dims", []byte{0x28, 0x00})}}
}

func placeholder(name, dev string) gd.Node {
	return gd.Node{Name: name, Op: "Placeholder", Device: dev, Attrs: []gd.Attr{gd.A("dtype", gd.Type(gd.Float))}}
}

func cast(name, dev string, src, dst int, in string) gd.Node {
	return gd.Node{Name: name, Op: "Cast", Device: dev, Inputs: []string{in},
		Attrs: []gd.Attr{gd.A("SrcT", gd.Type(src)), gd.A("DstT", gd.Type(dst))}}
}

func reshape(name, dev, tensor, shapeIn string) gd.Node {
	return gd.Node{Name: name, Op: "Reshape", Device: dev, Inputs: []string{tensor, shapeIn},
		Attrs: []gd.Attr{gd.A("T", gd.Type(gd.Float)), gd.A("Tshape", gd.Type(gd.Int32))}}
}

// smallOps is Grappler's OptimizeSmallOpsToHost graph with a device-resident
// float tensor: a (big) and c = Shape(a) stay, d and e move.
func smallOps() []gd.Node {
	return []gd.Node{
		gd.Const("a", "", gd.Float, 1024, 1024),
		shape("c", "", "a"),
		gd.Const("d", "", gd.Int32, 1),
		prod("e", "", gd.Int32, "c", "d"),
	}
}

func TestPinSmallOpsMovedBigTensorsLeft(t *testing.T) {
	g, st := runPin(t, smallOps(), PinOptions{})
	expectDevices(t, g, map[string]string{"a": "", "c": "", "d": cpu, "e": cpu})
	if st.Changed != 2 || st.Visited != 4 || len(st.Changes) != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestPinTopologicalOrderIndependent(t *testing.T) {
	nodes := smallOps()
	want := devices(func() *Graph { g, _ := runPin(t, nodes, PinOptions{}); return g }())
	for _, order := range [][]int{{3, 2, 1, 0}, {2, 3, 0, 1}, {1, 3, 0, 2}} {
		perm := make([]gd.Node, len(order))
		for i, j := range order {
			perm[i] = nodes[j]
		}
		g, _ := runPin(t, perm, PinOptions{})
		if got := devices(g); !maps.Equal(got, want) {
			t.Errorf("order %v: %v, want %v", order, got, want)
		}
	}
}

func TestPinNoSwap(t *testing.T) {
	// Grappler's NoSwap: a small int const feeding MatMul stays, as does b.
	g, st := runPin(t, []gd.Node{
		gd.Const("a", "", gd.Int32, 1, 1),
		gd.Const("b", "", gd.Int32, 1, 1024*1024),
		gd.Op("c", "MatMul", "", gd.Int32, "a", "b"),
	}, PinOptions{})
	expectDevices(t, g, map[string]string{"a": "", "b": "", "c": ""})
	if st.Changed != 0 {
		t.Errorf("changed %d", st.Changed)
	}
}

func TestPinIdentity(t *testing.T) {
	// Grappler's Identity case: b feeds Prod's reduction indices (a host
	// input) and moves; the explicit CPU Identity stays where it is; float
	// work stays on the GPU.
	g, _ := runPin(t, []gd.Node{
		gd.Const("a", gpu, gd.Float, 64, 64),
		gd.Const("b", "", gd.Int32, 2),
		prod("c", gpu, gd.Float, "a", "b"),
		gd.Op("d", "Identity", cpu, gd.Float, "c"),
		gd.Op("e", "Mul", "", gd.Float, "d", "d"),
	}, PinOptions{})
	expectDevices(t, g, map[string]string{"a": gpu, "b": cpu, "c": gpu, "d": cpu, "e": ""})
}

func TestPinIdentityChain(t *testing.T) {
	g, _ := runPin(t, []gd.Node{
		placeholder("x", gpu),
		gd.Const("k", gpu, gd.Int32, 2),
		gd.Op("id1", "Identity", gpu, gd.Int32, "k"),
		gd.Op("id2", "Identity", gpu, gd.Int32, "id1"),
		reshape("r", gpu, "x", "id2"),
	}, PinOptions{})
	expectDevices(t, g, map[string]string{"x": gpu, "k": cpu, "id1": cpu, "id2": cpu, "r": gpu})
}

func shapeN(name, dev string, in ...string) gd.Node {
	return gd.Node{Name: name, Op: "ShapeN", Device: dev, Inputs: in, Attrs: []gd.Attr{
		gd.A("N", gd.Int(int64(len(in)))), gd.A("T", gd.Type(gd.Int32)), gd.A("out_type", gd.Type(gd.Int32))}}
}

func TestPinShapeNPorts(t *testing.T) {
	base := []gd.Node{gd.Const("a", "", gd.Int32, 1, 2, 3), shapeN("b", "", "a", "a", "a")}
	// Grappler's PortIdToArgId: both move.
	g, _ := runPin(t, base, PinOptions{})
	expectDevices(t, g, map[string]string{"a": cpu, "b": cpu})

	// Output 1 read as Reshape's shape (a host input): still moves.
	g, _ = runPin(t, append(slices.Clone(base), placeholder("x", gpu), reshape("r", gpu, "x", "b:1")), PinOptions{})
	expectDevices(t, g, map[string]string{"a": cpu, "b": cpu, "r": gpu})

	// Output 2 read as Reshape's tensor (a device input): nothing moves.
	g, _ = runPin(t, append(slices.Clone(base), gd.Const("s", "", gd.Int32, 1), reshape("r", gpu, "b:2", "s")), PinOptions{})
	expectDevices(t, g, map[string]string{"a": "", "b": "", "s": cpu})
}

// musa builds x -> Shape -> StridedSlice -> Pack -> Reshape(x, pack) with
// every node of the chain explicitly on the GPU; x is host-fed.
func musa(floatConsumer bool) []gd.Node {
	const task = "/job:localhost/replica:0/task:0/device:GPU:0"
	nodes := []gd.Node{
		placeholder("x", cpu),
		shape("shape", task, "x"),
		gd.Const("begin", gpu, gd.Int32, 1),
		gd.Const("end", gpu, gd.Int32, 1),
		gd.Const("strides", gpu, gd.Int32, 1),
		{Name: "ss", Op: "StridedSlice", Device: gpu, Inputs: []string{"shape", "begin", "end", "strides"},
			Attrs: []gd.Attr{gd.A("T", gd.Type(gd.Int32)), gd.A("Index", gd.Type(gd.Int32)), gd.A("shrink_axis_mask", gd.Int(1))}},
		gd.Const("minus1", gpu, gd.Int32),
		{Name: "pack", Op: "Pack", Device: gpu, Inputs: []string{"ss", "minus1"},
			Attrs: []gd.Attr{gd.A("N", gd.Int(2)), gd.A("T", gd.Type(gd.Int32)), gd.A("axis", gd.Int(0))}},
		reshape("reshape", gpu, "x", "pack"),
	}
	if floatConsumer {
		nodes = append(nodes, cast("tofloat", gpu, gd.Int32, gd.Float, "pack"))
	}
	return nodes
}

func TestPinMUSAChainMovesAsOneUnit(t *testing.T) {
	g, st := runPin(t, musa(false), PinOptions{})
	expectDevices(t, g, map[string]string{
		"x": cpu, "shape": "/job:localhost/replica:0/task:0/device:CPU:0",
		"begin": cpu, "end": cpu, "strides": cpu, "ss": cpu, "minus1": cpu, "pack": cpu,
		"reshape": gpu,
	})
	if st.Changed != 7 {
		t.Errorf("changed %d, want 7", st.Changed)
	}
}

func TestPinMUSAChainWithFloatConsumerStays(t *testing.T) {
	g, st := runPin(t, musa(true), PinOptions{})
	for name, dev := range devices(g) {
		if name != "x" && dev == cpu {
			t.Errorf("%s moved to %s", name, dev)
		}
	}
	if st.Changed != 0 || len(st.Notes) == 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestPinShapeOfDeviceTensorStays(t *testing.T) {
	nodes := musa(false)
	nodes[0].Device = gpu // x now lives on the GPU
	g, _ := runPin(t, nodes, PinOptions{})
	expectDevices(t, g, map[string]string{"shape": "/job:localhost/replica:0/task:0/device:GPU:0", "ss": cpu, "pack": cpu})
}

// chain builds Shape(x) followed by n Casts alternating int32 -> int64 ->
// int32 (Cast's device kernel reads its input from device memory, so a
// removal propagates one link at a time), ending at Reshape's shape input.
// Nodes are listed producer first, so a sweep in listing order that
// re-evaluates nodes moves the frontier back by one link per sweep.
func chain(n int, floatConsumer bool) []gd.Node {
	nodes := []gd.Node{placeholder("x", cpu), shape("c0", gpu, "x")}
	types := []int{gd.Int32, gd.Int64}
	for i := 1; i <= n; i++ {
		nodes = append(nodes, cast(fmt.Sprintf("c%d", i), gpu, types[(i-1)%2], types[i%2], fmt.Sprintf("c%d", i-1)))
	}
	last := fmt.Sprintf("c%d", n)
	nodes = append(nodes, reshape("reshape", gpu, "x", last))
	if floatConsumer {
		nodes = append(nodes, cast("tofloat", gpu, types[n%2], gd.Float, last))
	}
	return nodes
}

func TestPinLongChain(t *testing.T) {
	const n = 100
	g, st := runPin(t, chain(n, false), PinOptions{})
	if st.Changed != n+1 {
		t.Errorf("without a float consumer: %d moved, want %d", st.Changed, n+1)
	}
	for name, dev := range devices(g) {
		if strings.HasPrefix(name, "c") && dev != cpu {
			t.Errorf("without a float consumer: %s on %q, want %q", name, dev, cpu)
		}
	}
	g, st = runPin(t, chain(n, true), PinOptions{})
	if st.Changed != 0 {
		t.Errorf("with a float consumer: %d moved, want 0", st.Changed)
	}
	for name, dev := range devices(g) {
		if strings.HasPrefix(name, "c") && dev != gpu {
			t.Errorf("%s on %q", name, dev)
		}
	}
	if st.FixpointSteps < n {
		t.Errorf("fixpoint steps %d < %d", st.FixpointSteps, n)
	}
}

// TestPinLongChainFixpointAlone checks that the worklist alone, before the
// all-or-nothing rule, removes the whole chain, and that the chain is one a
// 32-sweep bound would not finish.
func TestPinLongChainFixpointAlone(t *testing.T) {
	const n, sweepCap = 100, 32
	g, err := Decode(gd.GraphDef(gd.Graph{Nodes: chain(n, true)}))
	if err != nil {
		t.Fatal(err)
	}
	p := newPin(t, PinOptions{})
	newState := func() *pinState {
		s := new(pinState)
		s.reset(p, g) // every candidate in the set
		return s
	}
	s := newState()
	s.fixpoint()
	for i := range s.nodes {
		if s.in(int32(i)) {
			t.Errorf("%s still in the set after the fixpoint", s.nodes[i].Name())
		}
	}
	// A bounded sweep in listing order (the seed plugin's algorithm).
	s = newState()
	for range sweepCap {
		for i := range s.nodes {
			if s.in(int32(i)) && !s.check(i) {
				s.flags[i] &^= flagIn
			}
		}
	}
	left := 0
	for i := range s.nodes {
		if s.in(int32(i)) {
			left++
		}
	}
	if left == 0 {
		t.Fatal("the chain does not defeat a 32-sweep bound; the test graph is too easy")
	}
}

func TestPinDisabled(t *testing.T) {
	_, st := runPin(t, smallOps(), PinOptions{Disabled: true})
	if st.Changed != 0 || len(st.Notes) != 1 {
		t.Errorf("option: %+v", st)
	}
	_, st = runPin(t, smallOps(), PinOptions{Getenv: func(k string) string {
		if k == EnvDisableHostComputePin {
			return "1"
		}
		return ""
	}})
	if st.Changed != 0 || !strings.Contains(strings.Join(st.Notes, ""), EnvDisableHostComputePin) {
		t.Errorf("env: %+v", st)
	}
	t.Setenv(EnvDisableHostComputePin, "1")
	g, _ := Decode(gd.GraphDef(gd.Graph{Nodes: smallOps()}))
	var st2 Stats
	if err := newPin(t, PinOptions{}).Run(g, &st2); err != nil || st2.Changed != 0 {
		t.Errorf("real env: %+v %v", st2, err)
	}
}

func TestPinReplaceableTable(t *testing.T) {
	// Without Reshape in the table its shape input is a device input, so the
	// MUSA chain has a consumer that does not read from host memory.
	tbl, err := LoadHostMemoryTable(strings.NewReader(`{"ops": {"Shape": {"outputs": [0]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, st := runPin(t, musa(false), PinOptions{Table: tbl})
	if st.Changed != 0 {
		t.Errorf("changed %d with a table lacking Reshape", st.Changed)
	}
	if _, err := LoadHostMemoryTable(strings.NewReader(`{"ops": {"X": {"input": [1]}}}`)); err == nil {
		t.Error("unknown key accepted")
	}
}

func TestPinNeverFloat(t *testing.T) {
	g, _ := runPin(t, []gd.Node{
		gd.Const("a", gpu, gd.Float, 2),
		gd.Const("b", gpu, gd.Float, 2),
		gd.Op("s", "AddV2", gpu, gd.Float, "a", "b"),
		placeholder("x", gpu),
		{Name: "r", Op: "Reshape", Device: gpu, Inputs: []string{"x", "s"},
			Attrs: []gd.Attr{gd.A("T", gd.Type(gd.Float)), gd.A("Tshape", gd.Type(gd.Float))}},
	}, PinOptions{})
	for name, dev := range devices(g) {
		if dev != gpu {
			t.Errorf("%s moved to %q", name, dev)
		}
	}
}

func TestPinMissingProducer(t *testing.T) {
	// An input from outside the graph (e.g. a function argument) has unknown
	// placement: its consumer does not move.
	g, _ := runPin(t, []gd.Node{gd.Op("a", "AddV2", gpu, gd.Int32, "arg0", "arg1")}, PinOptions{})
	expectDevices(t, g, map[string]string{"a": gpu})
}

func TestHostMemoryTable(t *testing.T) {
	tbl := DefaultHostMemoryTable()
	g, err := Decode(gd.GraphDef(gd.Graph{Nodes: []gd.Node{
		reshape("r", gpu, "x", "s"),
		gd.Op("c", "ConcatV2", gpu, gd.Float, "a", "b", "axis"),
		gd.Op("i", "ConcatV2", gpu, gd.Int32, "a", "b", "axis"),
		shape("sh", gpu, "x"),
	}}))
	if err != nil {
		t.Fatal(err)
	}
	r, c, i, sh := g.Node("r"), g.Node("c"), g.Node("i"), g.Node("sh")
	checks := []struct {
		got, want bool
		what      string
	}{
		{tbl.InputOnHost(r, 1, 2), true, "Reshape shape"},
		{tbl.InputOnHost(r, 0, 2), false, "Reshape tensor"},
		{tbl.InputOnHost(c, 2, 3), true, "ConcatV2 axis (last)"},
		{tbl.InputOnHost(c, 0, 3), false, "ConcatV2 float value"},
		{tbl.InputOnHost(i, 0, 3), true, "ConcatV2 int32 value"},
		{tbl.OutputOnHost(sh, 0), true, "Shape output"},
		{tbl.OutputOnHost(c, 0), false, "ConcatV2 float output"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: %v, want %v", ch.what, ch.got, ch.want)
		}
	}
	if len(tbl.Ops) < 20 || tbl.Source == "" {
		t.Errorf("default table has %d ops, source %q", len(tbl.Ops), tbl.Source)
	}
}

// TestPinOptions: the zero value takes every default; a negative
// MaxConstElements is an error naming the field and what is valid; set
// fields are kept.
func TestPinOptions(t *testing.T) {
	p := newPin(t, PinOptions{})
	if p.opts.Table == nil || p.opts.HostDevice != DefaultHostDevice ||
		p.opts.MaxConstElements != DefaultMaxConstElements || p.opts.Getenv == nil || p.opts.Disabled {
		t.Errorf("zero PinOptions: %+v", p.opts)
	}
	tbl := &HostMemoryTable{}
	p = newPin(t, PinOptions{Table: tbl, HostDevice: "/job:h/device:CPU:1", MaxConstElements: 3})
	if p.opts.Table != tbl || p.opts.HostDevice != "/job:h/device:CPU:1" || p.opts.MaxConstElements != 3 {
		t.Errorf("set PinOptions not kept: %+v", p.opts)
	}
	_, err := NewPinHostCompute(PinOptions{MaxConstElements: -1})
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("MaxConstElements -1: err = %v, want ErrInvalidOption", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "PinOptions.MaxConstElements -1") || !strings.Contains(msg, "want 0 (the default, 64) or more") {
		t.Errorf("MaxConstElements -1: %q does not name the field and what is valid", msg)
	}
}
