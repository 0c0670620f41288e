package graphpass

// The decoded graph: Graph, its Nodes and the attr values passes read.
//
// A Graph keeps every byte of its input (one copy, as a string, which the
// decoded strings share) and records the top-level fields of the GraphDef
// in input order as byte ranges of that copy; a node field additionally
// gets a *Node that records the byte ranges of its own fields. decode.go
// fills these records; encode.go writes them back.

import (
	"math"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
)

// span is a byte range [start, end) of a buffer. Offsets are int32 (inputs
// are under 2 GiB) to keep the per-field records small.
type span struct{ start, end int32 }

// topField is one top-level field of the GraphDef.
type topField struct {
	span
	node *Node // non-nil for node fields
}

// Graph is a decoded GraphDef. It keeps its own copy of the input, so the
// caller may reuse the buffer given to Decode.
//
// Locking: a Graph has no mutex. nameOnce guards byName, built on the first
// Node call, so concurrent readers may share a Graph; SetDevice writes its
// Node without a lock, so a pass that changes a Graph needs it to itself
// (no reader, no other writer) while it runs.
type Graph struct {
	raw    string // the input; decoded strings are substrings of it
	fields []topField
	nodes  []*Node

	nameOnce sync.Once // guards byName, built on the first Node call
	byName   map[string]int
}

// Node is one NodeDef. Name, op, inputs and attrs are read-only; the device
// is the field passes change, through SetDevice.
type Node struct {
	name, op string
	inputs   []string
	device   string
	attrs    []Attr

	raw     string // the NodeDef payload (without tag and length)
	fields  []nodeField
	origDev string
	tagLen  uint8 // bytes of the node's tag in the GraphDef (at most 10)
	changed bool
}

type nodeField struct {
	span
	num protowire.Number
}

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
func (g *Graph) Nodes() []*Node { return g.nodes }

// Node returns the node named name, or nil.
// When several nodes share a name (an invalid graph), the first is
// returned, as the passes' edge index also resolves inputs to the first.
func (g *Graph) Node(name string) *Node {
	g.nameOnce.Do(func() {
		g.byName = make(map[string]int, len(g.nodes))
		for i, n := range g.nodes {
			if _, dup := g.byName[n.name]; !dup {
				g.byName[n.name] = i
			}
		}
	})
	if i, ok := g.byName[name]; ok {
		return g.nodes[i]
	}
	return nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Op returns the node's op type.
func (n *Node) Op() string { return n.op }

// Inputs returns the node's inputs as written ("x", "x:1", "^ctrl"). The
// slice is shared; do not modify it.
func (n *Node) Inputs() []string { return n.inputs }

// Device returns the node's requested device ("" when unset).
func (n *Node) Device() string { return n.device }

// Attrs returns the decoded attrs in input order. Shared; do not modify.
func (n *Node) Attrs() []Attr { return n.attrs }

// Attr returns the attr named name (the last one, as protobuf maps do).
func (n *Node) Attr(name string) (AttrValue, bool) {
	for i := len(n.attrs) - 1; i >= 0; i-- {
		if n.attrs[i].Name == name {
			return n.attrs[i].Value, true
		}
	}
	return AttrValue{}, false
}

// TypeAttr returns the DataType of a type attr, or DTInvalid.
func (n *Node) TypeAttr(name string) DataType {
	if v, ok := n.Attr(name); ok && v.Kind == AttrType {
		return v.Type
	}
	return DTInvalid
}

// SetDevice sets the node's device. Encode rewrites only this field of
// the node, and only when the value differs from the decoded one.
func (n *Node) SetDevice(d string) {
	n.device = d
	n.changed = d != n.origDev
}

// Changed reports whether the node's device differs from the decoded one.
func (n *Node) Changed() bool { return n.changed }
