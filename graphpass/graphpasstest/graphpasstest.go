// Package graphpasstest builds serialized TensorFlow GraphDefs on the
// protobuf wire format, without generated TensorFlow protos, for tests and
// benchmarks of graph passes (graphpass's own, a caller's, and accbench's):
// NodeDef and AttrValue builders, and Model, a generated model-shaped graph
// of any size.
package graphpasstest

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// DataType values from types.proto used by tests.
const (
	Float = 1
	Int32 = 3
	Int64 = 9
	Bool  = 10
)

// Node describes one NodeDef.
type Node struct {
	Name, Op string
	Inputs   []string
	Device   string
	Attrs    []Attr
	Unknown  []byte // raw bytes appended after the known fields (unknown fields)
}

// Attr is one attr entry with its serialized AttrValue.
type Attr struct {
	Name  string
	Value []byte
}

// Type returns an AttrValue{type: t}.
func Type(t int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, 6, protowire.VarintType), uint64(t))
}

// Int returns an AttrValue{i: v}.
func Int(v int64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), uint64(v))
}

// TypeList returns an AttrValue{list: {type: ts (packed)}}.
func TypeList(ts ...int) []byte {
	var packed []byte
	for _, t := range ts {
		packed = protowire.AppendVarint(packed, uint64(t))
	}
	list := protowire.AppendBytes(protowire.AppendTag(nil, 6, protowire.BytesType), packed)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), list)
}

// ShapeProto returns a TensorShapeProto with the given dims.
func ShapeProto(dims ...int64) []byte {
	var b []byte
	for _, d := range dims {
		dim := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(d))
		b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), dim)
	}
	return b
}

// Tensor returns an AttrValue{tensor: {dtype, tensor_shape, tensor_content}}
// with zeroed content of the right size for 4- or 8-byte elements.
func Tensor(dtype int, dims ...int64) []byte {
	t := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(dtype))
	t = protowire.AppendBytes(protowire.AppendTag(t, 2, protowire.BytesType), ShapeProto(dims...))
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	if n <= 4096 { // keep test graphs small; content size is irrelevant to passes
		elem := int64(4)
		if dtype == Int64 {
			elem = 8
		}
		t = protowire.AppendBytes(protowire.AppendTag(t, 4, protowire.BytesType), make([]byte, n*elem))
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), t)
}

// Func returns an AttrValue{func: {name, attr}}.
func Func(name string, attrs ...Attr) []byte {
	f := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), name)
	for _, a := range attrs {
		f = protowire.AppendBytes(protowire.AppendTag(f, 2, protowire.BytesType), entry(a))
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 10, protowire.BytesType), f)
}

func entry(a Attr) []byte {
	e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), a.Name)
	return protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), a.Value)
}

// NodeDef serializes n in field-number order, as TensorFlow writes it.
func NodeDef(n Node) []byte {
	b := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), n.Name)
	b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), n.Op)
	for _, in := range n.Inputs {
		b = protowire.AppendString(protowire.AppendTag(b, 3, protowire.BytesType), in)
	}
	if n.Device != "" {
		b = protowire.AppendString(protowire.AppendTag(b, 4, protowire.BytesType), n.Device)
	}
	for _, a := range n.Attrs {
		b = protowire.AppendBytes(protowire.AppendTag(b, 5, protowire.BytesType), entry(a))
	}
	return append(b, n.Unknown...)
}

// Graph describes a GraphDef. Versions and Library are raw message bytes
// written when non-nil; Unknown is appended raw at the end.
type Graph struct {
	Nodes    []Node
	Versions []byte
	Library  []byte
	Unknown  []byte
}

// GraphDef serializes g: library (2), nodes (1), versions (4), unknown, in
// that order so tests cover non-node fields before and after nodes.
func GraphDef(g Graph) []byte {
	var b []byte
	if g.Library != nil {
		b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), g.Library)
	}
	for _, n := range g.Nodes {
		b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), NodeDef(n))
	}
	if g.Versions != nil {
		b = protowire.AppendBytes(protowire.AppendTag(b, 4, protowire.BytesType), g.Versions)
	}
	return append(b, g.Unknown...)
}

// Versions returns a VersionDef{producer, min_consumer}.
func Versions(producer, minConsumer int) []byte {
	b := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(producer))
	return protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(minConsumer))
}

// Const returns a Const node of dtype with the given shape.
func Const(name, device string, dtype int, dims ...int64) Node {
	return Node{Name: name, Op: "Const", Device: device, Attrs: []Attr{
		{"dtype", Type(dtype)},
		{"value", Tensor(dtype, dims...)},
	}}
}

// Op returns a node with attr T (and any extra attrs).
func Op(name, op, device string, t int, inputs ...string) Node {
	return Node{Name: name, Op: op, Device: device, Inputs: inputs, Attrs: []Attr{{"T", Type(t)}}}
}

// A returns an Attr.
func A(name string, value []byte) Attr { return Attr{Name: name, Value: value} }

// Model returns a GraphDef of about n nodes shaped like a real model: blocks
// of float work on the GPU (MatMul, Add) with the shape arithmetic of a
// reshape in between (Shape -> StridedSlice -> Pack -> Reshape's shape).
// Every block's shape chain reads a host-fed tensor, so it is movable; one
// block in eight also feeds its Pack to a float Cast, so it is not.
func Model(n int) []byte {
	const gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
	f32, i32 := A("T", Type(Float)), A("T", Type(Int32))
	nodes := []Node{{Name: "input", Op: "Placeholder", Device: "/device:CPU:0", Attrs: []Attr{A("dtype", Type(Float)), A("shape", ShapeProto(-1, 128))}}}
	prev := "input"
	for b := 0; len(nodes) < n; b++ {
		p := func(s string) string { return "block" + itoa(b) + "/" + s }
		nodes = append(nodes,
			Const(p("w"), gpu, Float, 128, 128),
			Node{Name: p("mm"), Op: "MatMul", Device: gpu, Inputs: []string{prev, p("w")}, Attrs: []Attr{f32, A("transpose_a", []byte{0x28, 0}), A("transpose_b", []byte{0x28, 0})}},
			Node{Name: p("shape"), Op: "Shape", Device: gpu, Inputs: []string{"input"}, Attrs: []Attr{f32, A("out_type", Type(Int32))}},
			Const(p("begin"), gpu, Int32, 1),
			Const(p("end"), gpu, Int32, 1),
			Const(p("strides"), gpu, Int32, 1),
			Node{Name: p("ss"), Op: "StridedSlice", Device: gpu, Inputs: []string{p("shape"), p("begin"), p("end"), p("strides")}, Attrs: []Attr{i32, A("Index", Type(Int32)), A("shrink_axis_mask", Int(1))}},
			Const(p("dim"), gpu, Int32),
			Node{Name: p("pack"), Op: "Pack", Device: gpu, Inputs: []string{p("ss"), p("dim")}, Attrs: []Attr{i32, A("N", Int(2)), A("axis", Int(0))}},
			Node{Name: p("reshape"), Op: "Reshape", Device: gpu, Inputs: []string{p("mm"), p("pack")}, Attrs: []Attr{f32, A("Tshape", Type(Int32))}},
			Node{Name: p("relu"), Op: "Relu", Device: gpu, Inputs: []string{p("reshape")}, Attrs: []Attr{f32}},
		)
		if b%8 == 7 {
			nodes = append(nodes, Node{Name: p("tofloat"), Op: "Cast", Device: gpu, Inputs: []string{p("pack")}, Attrs: []Attr{A("SrcT", Type(Int32)), A("DstT", Type(Float))}})
		}
		prev = p("relu")
	}
	return GraphDef(Graph{Nodes: nodes, Versions: Versions(1645, 12)})
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}
