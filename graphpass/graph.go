package graphpass

// The decoded graph: Graph, its Nodes and the attr values passes read.
//
// A Graph keeps every byte of its input (one copy, as a string, which the
// decoded strings share) and one record per NodeDef saying where the node
// and its name and op are in that copy. decode.go checks the input and
// fills these records; detail.go decodes a node's inputs and attrs when
// they are first asked for; encode.go writes the graph back.

import (
	"math"
	"sync"
	"sync/atomic"
)

// Graph is a decoded GraphDef. It keeps its own copy of the input, so the
// caller may reuse the buffer given to Decode.
//
// Concurrent readers may share a Graph. A pass that changes it
// (SetDevice) needs it to itself, with no reader and no other writer,
// while it runs.
type Graph struct {
	// Locking: a Graph has no mutex. Once-built state is guarded by a sync.Once
	// each (ptrsOnce: ptrs; nameOnce: byName; detailOnce: details), and each
	// node's decoded inputs and attrs are published through an
	// atomic.Pointer in details, so concurrent readers may share a Graph;
	// SetDevice writes its Node and devices without a lock, so a pass that
	// changes a Graph needs it to itself (no reader, no other writer) while it
	// runs.

	raw    string // the input; decoded strings are substrings of it
	buf    []byte // raw's bytes, for protowire; never written
	nodes  []Node // every NodeDef, in input order
	inputs int    // NodeDef inputs in all, control inputs included

	ptrsOnce sync.Once // guards ptrs, built on the first Nodes call
	ptrs     []*Node

	nameOnce sync.Once // guards byName, built on the first Node call
	byName   map[string]int

	detailOnce sync.Once // guards the allocation of details
	details    []atomic.Pointer[nodeDetail]

	// devices are the distinct devices SetDevice gave nodes (a pass sets
	// a handful), so a node record holds an index, not a string.
	devices  []string
	devIndex map[string]int32 // devices' indices, once there are many
}

// Node is one NodeDef. Name, op, inputs and attrs are read-only; the device
// is the field passes change, through SetDevice.
//
// A Node records where its fields are in the Graph's copy of the input: its
// name and op are substrings of it, and its inputs and attrs are decoded on
// first use (Inputs, Attrs, Attr), so decoding a graph costs one small
// record per node. Passes read attrs straight from the bytes.
type Node struct {
	g       *Graph
	payload int32 // offset of the NodeDef payload in g.raw
	size    int32 // payload length
	nameAt  int32
	nameLen int32
	opAt    int32
	opLen   int32
	idx     int32 // index in g.nodes
	// devField is the offset in g.raw of the node's last device field (its
	// tag), the device it was decoded with; without one, -1 minus the
	// offset where Encode inserts one: the first field numbered above 4,
	// or the payload's end.
	devField int32
	// devSet is 0 while the device is the decoded one, else 1 + its index
	// in g.devices (SetDevice).
	devSet int32
	lenLen uint8 // bytes of the payload's length prefix (at most 5)
}

// bytes returns the node's NodeDef payload, a sub-slice of g.buf.
func (n *Node) bytes() []byte { return n.g.buf[n.payload : n.payload+n.size] }

// Attr is one decoded entry of NodeDef.attr.
type Attr struct {
	Name  string
	Value AttrValue
}

// AttrKind says which member of the AttrValue oneof is set.
type AttrKind uint8

// AttrValue kinds.
const (
	AttrUnset AttrKind = iota
	AttrList
	AttrString
	AttrInt
	AttrFloat
	AttrBool
	AttrType
	AttrShape
	AttrTensor
	AttrPlaceholder
	AttrFunc
)

// AttrValue is the decoded subset of an AttrValue. It is kept small (one
// per attr of every node) by sharing fields between kinds.
type AttrValue struct {
	Kind AttrKind
	B    bool     // AttrBool
	Type DataType // AttrType; AttrTensor: the tensor's dtype
	F    float32  // AttrFloat
	I    int64    // AttrInt
	S    string   // AttrString, AttrPlaceholder; AttrFunc: the function name
	// Shape is the value of AttrShape and the tensor shape of AttrTensor
	// (TensorProto contents are not decoded).
	Shape Shape
	List  *List   // AttrList: types, ints and shapes; other lists are counted
	Func  *[]Attr // AttrFunc: the NameAttrList's attrs
}

// List is the decoded subset of AttrValue.ListValue.
type List struct {
	Types  []DataType
	Ints   []int64
	Shapes []Shape
	Other  int // entries of other kinds (s, f, b, tensor, func)
}

// Shape is a TensorShapeProto: dims (-1 for unknown) or unknown rank.
type Shape struct {
	Dims        []int64
	UnknownRank bool
}

// NumElements returns the element count, or -1 when unknown.
func (s Shape) NumElements() int64 {
	if s.UnknownRank {
		return -1
	}
	n := int64(1)
	for _, d := range s.Dims {
		if d < 0 {
			return -1
		}
		if d != 0 && n > math.MaxInt64/d {
			return -1
		}
		n *= d
	}
	return n
}

// Nodes returns the graph's nodes in input order. The slice is shared;
// do not modify it.
func (g *Graph) Nodes() []*Node {
	g.ptrsOnce.Do(func() {
		g.ptrs = make([]*Node, len(g.nodes))
		for i := range g.nodes {
			g.ptrs[i] = &g.nodes[i]
		}
	})
	return g.ptrs
}

// Node returns the node named name, or nil.
// When several nodes share a name (an invalid graph), the first is
// returned, as the passes' edge index also resolves inputs to the first.
func (g *Graph) Node(name string) *Node {
	g.nameOnce.Do(func() {
		g.byName = make(map[string]int, len(g.nodes))
		for i := range g.nodes {
			if _, dup := g.byName[g.nodes[i].Name()]; !dup {
				g.byName[g.nodes[i].Name()] = i
			}
		}
	})
	if i, ok := g.byName[name]; ok {
		return &g.nodes[i]
	}
	return nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.g.raw[n.nameAt : n.nameAt+n.nameLen] }

// Op returns the node's op type.
func (n *Node) Op() string { return n.g.raw[n.opAt : n.opAt+n.opLen] }

// Inputs returns the node's inputs as written ("x", "x:1", "^ctrl"). The
// slice is shared; do not modify it. They are decoded on the first call of
// Inputs, Attrs or Attr on the node.
func (n *Node) Inputs() []string { return n.detail().inputs }

// Device returns the node's requested device ("" when unset).
func (n *Node) Device() string {
	if n.devSet != 0 {
		return n.g.devices[n.devSet-1]
	}
	return n.decodedDevice()
}

// Attrs returns the decoded attrs in input order. Shared; do not modify.
// They are decoded on the first call of Inputs, Attrs or Attr on the node.
func (n *Node) Attrs() []Attr { return n.detail().attrs }

// Attr returns the attr named name (the last one, as protobuf maps do).
func (n *Node) Attr(name string) (AttrValue, bool) {
	attrs := n.Attrs()
	for i := len(attrs) - 1; i >= 0; i-- {
		if attrs[i].Name == name {
			return attrs[i].Value, true
		}
	}
	return AttrValue{}, false
}

// TypeAttr returns the DataType of a type attr, or DTInvalid. It reads the
// attr from the node's bytes and allocates nothing.
func (n *Node) TypeAttr(name string) DataType {
	if v, ok := n.attrValueBytes(name); ok {
		if num, b := lastValueField(v); num == fAttrType {
			return DataType(varint(b))
		}
	}
	return DTInvalid
}

// SetDevice sets the node's device. Encode rewrites only this field of
// the node, and only when the value differs from the decoded one.
func (n *Node) SetDevice(d string) {
	if d == n.decodedDevice() {
		n.devSet = 0
		return
	}
	n.devSet = n.g.internDevice(d) + 1
}

// internDevice returns d's index in g.devices, adding it when new: the
// graph keeps each distinct device set once, however many nodes and
// SetDevice calls use it.
func (g *Graph) internDevice(d string) int32 {
	const scan = 8 // devices looked up by scanning; a map beyond
	if g.devIndex == nil {
		for i := len(g.devices) - 1; i >= 0; i-- {
			if g.devices[i] == d {
				return int32(i)
			}
		}
		if len(g.devices) < scan {
			g.devices = append(g.devices, d)
			return int32(len(g.devices) - 1)
		}
		g.devIndex = make(map[string]int32, 2*scan)
		for i, dev := range g.devices {
			g.devIndex[dev] = int32(i)
		}
	}
	if i, ok := g.devIndex[d]; ok {
		return i
	}
	g.devices = append(g.devices, d)
	g.devIndex[d] = int32(len(g.devices) - 1)
	return int32(len(g.devices) - 1)
}

// Changed reports whether the node's device differs from the decoded one.
func (n *Node) Changed() bool { return n.devSet != 0 }
