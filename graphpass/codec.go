package graphpass

// GraphDef codec on the protobuf wire format.
//
// The codec decodes only what passes read and keeps every byte of the
// input (one copy of it, as a string, which decoded strings share). A Graph records the top-level fields of the GraphDef in input
// order as byte ranges of the original buffer; node fields additionally get
// a *Node that records the byte ranges of its own fields. Encode copies
// every range unchanged, except that a node whose device was changed is
// re-encoded: its tag is copied, its length prefix rewritten, and inside it
// only the device field is replaced (or inserted before the first field
// numbered above 4, or dropped when set to ""); all its other fields are
// copied in their original order. So an unchanged graph encodes to the
// identical bytes, and a changed graph differs only inside changed NodeDefs.
//
// Field numbers (tensorflow/core/framework/*.proto):
//
//	GraphDef:          node=1, library=2, version=3, versions=4, debug_info=5
//	NodeDef:           name=1, op=2, input=3, device=4, attr=5 (map entry key=1, value=2)
//	AttrValue:         list=1, s=2, i=3, f=4, b=5, type=6, shape=7, tensor=8, placeholder=9, func=10
//	AttrValue.ListValue: s=2, i=3, f=4, b=5, type=6, shape=7, tensor=8, func=9
//	NameAttrList:      name=1, attr=2
//	TensorProto:       dtype=1, tensor_shape=2
//	TensorShapeProto:  dim=2 (size=1, name=2), unknown_rank=3
//
// Bounds: lengths are checked against the bytes that remain, so a crafted
// length fails instead of allocating; func attrs, the only recursive shape
// decoded, are followed at most Limits.MaxDepth levels; Limits also caps the
// input size, node count and attrs per node.
//
// Memory is bounded per input byte, not only per limit: an item the decoder
// allocates for (a node, a field, an attr, an input, a list entry, a dim)
// takes as little as two wire bytes but tens of bytes decoded, so a file of
// empty NodeDefs would otherwise cost over 100 times its size. The decoder
// therefore charges every allocation it makes against a budget of
// Limits.MaxAllocPerByte bytes per input byte (plus allocSlack) and refuses
// the input with ErrLimit before an allocation would exceed it. Sizes come
// from the input: a first pass counts the top-level fields and nodes, so the
// graph's field list and all nodes are allocated once, exactly (and a file
// of empty NodeDefs is refused before anything is allocated); packed lists
// are counted before they are decoded; per-node scratch buffers and list
// slices double as append would, charged as they grow; and arena chunks
// start small and double, never larger than the rest of the input could
// fill.

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrMalformed is returned (wrapped) for input that is not a valid GraphDef.
var ErrMalformed = errors.New("graphpass: malformed graphdef")

// ErrLimit is returned (wrapped) when input exceeds a decoding limit.
var ErrLimit = errors.New("graphpass: decoding limit exceeded")

// Field numbers used by the codec.
const (
	fGraphNode = 1

	fNodeName   = 1
	fNodeOp     = 2
	fNodeInput  = 3
	fNodeDevice = 4
	fNodeAttr   = 5

	fMapKey   = 1
	fMapValue = 2

	fAttrList   = 1
	fAttrS      = 2
	fAttrI      = 3
	fAttrF      = 4
	fAttrB      = 5
	fAttrType   = 6
	fAttrShape  = 7
	fAttrTensor = 8
	fAttrPH     = 9
	fAttrFunc   = 10

	fListType  = 6
	fListI     = 3
	fListShape = 7

	fNameAttrName = 1
	fNameAttrAttr = 2

	fTensorDtype = 1
	fTensorShape = 2

	fShapeDim     = 2
	fShapeUnknown = 3
	fDimSize      = 1
)

// Limits bounds decoding. A zero field means the DefaultLimits value.
type Limits struct {
	// MaxBytes caps the input size. Protobuf refuses messages of 2 GiB or
	// more, and so does Decode: larger values mean 2 GiB − 1.
	MaxBytes int
	// MaxNodes caps the number of NodeDefs.
	MaxNodes int
	// MaxAttrsPerNode caps the attrs of one node, and of one func attr.
	MaxAttrsPerNode int
	// MaxDepth caps the nesting of func attrs (NameAttrList inside
	// AttrValue), the only recursive message decoded.
	MaxDepth int
	// MaxAllocPerByte caps what decoding allocates besides the one copy of
	// the input the Graph keeps: nodes, field records, attrs, inputs,
	// lists and shapes, in bytes per input byte (plus a few KiB for any
	// graph). Model-shaped graphs need about 4; an input that needs more
	// than the limit, such as millions of empty NodeDefs, attrs or inputs,
	// is refused with ErrLimit before the allocation that would exceed it.
	MaxAllocPerByte int
}

// DefaultLimits are generous for real models and small enough that hostile
// input cannot exhaust memory: Decode allocates at most 1 + MaxAllocPerByte
// bytes per input byte, and at most 2 GiB of input is accepted.
var DefaultLimits = Limits{
	MaxBytes:        math.MaxInt32, // protobuf's 2 GiB message limit
	MaxNodes:        10_000_000,
	MaxAttrsPerNode: 10_000,
	MaxDepth:        32,
	MaxAllocPerByte: 32,
}

// allocSlack is the budget every input gets on top of MaxAllocPerByte per
// byte, so a graph of a few nodes decodes: the first scratch buffers and
// arena chunks cost a few hundred bytes each.
const allocSlack = 4 << 10

func (l Limits) orDefault() Limits {
	d := DefaultLimits
	if l.MaxBytes > 0 {
		d.MaxBytes = min(l.MaxBytes, math.MaxInt32)
	}
	if l.MaxNodes > 0 {
		d.MaxNodes = l.MaxNodes
	}
	if l.MaxAttrsPerNode > 0 {
		d.MaxAttrsPerNode = l.MaxAttrsPerNode
	}
	if l.MaxDepth > 0 {
		d.MaxDepth = l.MaxDepth
	}
	if l.MaxAllocPerByte > 0 {
		d.MaxAllocPerByte = l.MaxAllocPerByte
	}
	return d
}

// span is a byte range [start, end) of a buffer. Offsets are int32 (inputs
// are under 2 GiB) to keep the per-field records small.
type span struct{ start, end int32 }

// topField is one top-level field of the GraphDef.
type topField struct {
	span
	node *Node // non-nil for node fields
}

// Graph is a decoded GraphDef. It keeps its own copy of the input, so the
// caller may reuse the buffer given to Decode. A Graph is not safe for
// concurrent use while a pass changes it; concurrent reads are safe.
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

// decoder holds one Decode call's state. Strings are substrings of str (one
// copy of the input) and small slices are carved from shared arenas, so a
// node costs a handful of allocations however many fields it has. Every
// allocation is charged to budget first (see the note at the top).
type decoder struct {
	root   []byte
	str    string
	lim    Limits
	budget int // bytes the decoder may still allocate
	at     int // offset in root of the node being decoded
	// Per-node scratch, reused; carved into chunked arenas at node end.
	fields []nodeField
	inputs []string
	attrs  []Attr
	dims   []int64
	// Arenas: chunks never grown in place, so carved slices stay valid and
	// no element is copied twice.
	fieldArena []nodeField
	inputArena []string
	attrArena  []Attr
	dimArena   []int64
}

// Arena chunks start at firstChunk elements and double up to arenaChunk:
// large enough that chunk allocation is rare, small enough that the unused
// tail is cheap, and a small graph does not pay for a large chunk.
const (
	firstChunk = 16
	arenaChunk = 4096
)

// minItemBytes is the fewest wire bytes of any item the decoder stores
// (a field, node, attr, input, list entry or dim): a tag and a length or
// varint byte. So the bytes left bound the items still to come.
const minItemBytes = 2

// charge takes n bytes from the budget, or fails when it would run out.
func (d *decoder) charge(n int) error {
	if n > d.budget {
		return fmt.Errorf("%w: decoding needs more than %d bytes of memory per input byte (Limits.MaxAllocPerByte; model-shaped graphs need about 4)", ErrLimit, d.lim.MaxAllocPerByte)
	}
	d.budget -= n
	return nil
}

// sizeOf returns the size of a T in bytes.
func sizeOf[T any]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// push appends v to *s. When *s is full, the new backing array (double the
// old, as append would grow it) is charged to d before it is allocated. It
// starts at one element: most lists and func attrs hold one or two.
func push[T any](d *decoder, s *[]T, v T) error {
	if len(*s) == cap(*s) {
		c := max(2*cap(*s), 1)
		if err := d.charge(c * sizeOf[T]()); err != nil {
			return err
		}
		grown := make([]T, len(*s), c)
		copy(grown, *s)
		*s = grown
	}
	*s = append(*s, v)
	return nil
}

// carve copies src into the arena's current chunk, starting a new chunk
// when it does not fit, and returns the copy, capped to its length. A new
// chunk doubles the last one up to arenaChunk elements, but is never larger
// than the rest of the input (from the current node on) could fill, nor
// smaller than src.
func carve[T any](d *decoder, arena *[]T, src []T) ([]T, error) {
	if len(src) == 0 {
		return nil, nil
	}
	if cap(*arena)-len(*arena) < len(src) {
		n := min(max(2*cap(*arena), firstChunk), arenaChunk, (len(d.root)-d.at)/minItemBytes)
		n = max(n, len(src))
		if err := d.charge(n * sizeOf[T]()); err != nil {
			return nil, err
		}
		*arena = make([]T, 0, n)
	}
	a := *arena
	n := len(a)
	a = append(a, src...)
	*arena = a
	return a[n:len(a):len(a)], nil
}

// s returns the string for v, a sub-slice of d.root, without copying.
func (d *decoder) s(v []byte) string {
	off := cap(d.root) - cap(v)
	return d.str[off : off+len(v)]
}

// Decode decodes a serialized GraphDef with DefaultLimits.
func Decode(b []byte) (*Graph, error) { return DecodeLimits(b, Limits{}) }

// DecodeLimits decodes a serialized GraphDef within lim. Input beyond a
// limit, including input whose decoding would allocate more than
// lim.MaxAllocPerByte bytes per input byte, fails with ErrLimit; input that
// is not a GraphDef fails with ErrMalformed.
func DecodeLimits(b []byte, lim Limits) (*Graph, error) {
	lim = lim.orDefault()
	if len(b) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrLimit, len(b), lim.MaxBytes)
	}
	nFields, nNodes, err := frame(b, lim)
	if err != nil {
		return nil, err
	}
	d := &decoder{root: b, lim: lim, budget: allocSlack}
	if per := lim.MaxAllocPerByte; len(b) > 0 && per > (math.MaxInt-allocSlack)/len(b) {
		d.budget = math.MaxInt
	} else {
		d.budget += per * len(b)
	}
	// The graph's records and every node, in three exact allocations.
	if err := d.charge(nFields*sizeOf[topField]() + nNodes*(sizeOf[Node]()+sizeOf[*Node]())); err != nil {
		return nil, fmt.Errorf("%d nodes and %d other fields in %d bytes: %w", nNodes, nFields-nNodes, len(b), err)
	}
	d.str = string(b)
	g := &Graph{raw: d.str, fields: make([]topField, 0, nFields), nodes: make([]*Node, 0, nNodes)}
	nodes := make([]Node, nNodes)
	off := 0
	for off < len(b) {
		// frame checked the framing.
		num, typ, tl := protowire.ConsumeTag(b[off:])
		f := topField{span: span{start: int32(off)}}
		if num == fGraphNode {
			payload, vl := protowire.ConsumeBytes(b[off+tl:])
			n := &nodes[len(g.nodes)]
			d.at = off
			if err := d.node(n, payload); err != nil {
				return nil, fmt.Errorf("node %d (byte %d): %w", len(g.nodes), off, err)
			}
			n.tagLen = uint8(tl)
			f.node = n
			g.nodes = append(g.nodes, n)
			off += tl + vl
		} else {
			off += tl + protowire.ConsumeFieldValue(num, typ, b[off+tl:])
		}
		f.end = int32(off)
		g.fields = append(g.fields, f)
	}
	return g, nil
}

// frame checks the framing of the GraphDef's top-level fields (tags,
// lengths, the node field's wire type) and counts the fields and nodes.
func frame(b []byte, lim Limits) (fields, nodes int, err error) {
	off := 0
	for off < len(b) {
		num, typ, tl := protowire.ConsumeTag(b[off:])
		if tl < 0 {
			return 0, 0, fmt.Errorf("%w: graphdef field at byte %d: %w", ErrMalformed, off, protowire.ParseError(tl))
		}
		vl := protowire.ConsumeFieldValue(num, typ, b[off+tl:])
		if vl < 0 {
			return 0, 0, fmt.Errorf("%w: graphdef field %d at byte %d: %w", ErrMalformed, num, off, protowire.ParseError(vl))
		}
		if num == fGraphNode {
			if typ != protowire.BytesType {
				return 0, 0, fmt.Errorf("%w: graphdef field node at byte %d has wire type %d, want bytes", ErrMalformed, off, typ)
			}
			if nodes >= lim.MaxNodes {
				return 0, 0, fmt.Errorf("%w: more than %d nodes", ErrLimit, lim.MaxNodes)
			}
			nodes++
		}
		fields++
		off += tl + vl
	}
	return fields, nodes, nil
}

func (d *decoder) node(n *Node, b []byte) error {
	n.raw = d.s(b)
	d.fields, d.inputs, d.attrs = d.fields[:0], d.inputs[:0], d.attrs[:0]
	off := 0
	for off < len(b) {
		num, typ, tl := protowire.ConsumeTag(b[off:])
		if tl < 0 {
			return fmt.Errorf("%w: nodedef: %w", ErrMalformed, protowire.ParseError(tl))
		}
		vl := protowire.ConsumeFieldValue(num, typ, b[off+tl:])
		if vl < 0 {
			return fmt.Errorf("%w: nodedef field %d: %w", ErrMalformed, num, protowire.ParseError(vl))
		}
		switch num {
		case fNodeName, fNodeOp, fNodeInput, fNodeDevice, fNodeAttr:
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: nodedef field %d has wire type %d, want bytes", ErrMalformed, num, typ)
			}
			v, _ := protowire.ConsumeBytes(b[off+tl:])
			switch num {
			case fNodeName:
				n.name = d.s(v)
			case fNodeOp:
				n.op = d.s(v)
			case fNodeInput:
				if err := push(d, &d.inputs, d.s(v)); err != nil {
					return err
				}
			case fNodeDevice:
				n.device = d.s(v)
			case fNodeAttr:
				if len(d.attrs) >= d.lim.MaxAttrsPerNode {
					return fmt.Errorf("%w: more than %d attrs on node %q", ErrLimit, d.lim.MaxAttrsPerNode, n.name)
				}
				a, err := d.mapEntry(v, 0)
				if err != nil {
					return err
				}
				if err := push(d, &d.attrs, a); err != nil {
					return err
				}
			}
		}
		if err := push(d, &d.fields, nodeField{span{int32(off), int32(off + tl + vl)}, num}); err != nil {
			return err
		}
		off += tl + vl
	}
	var err error
	if n.fields, err = carve(d, &d.fieldArena, d.fields); err != nil {
		return err
	}
	if n.inputs, err = carve(d, &d.inputArena, d.inputs); err != nil {
		return err
	}
	if n.attrs, err = carve(d, &d.attrArena, d.attrs); err != nil {
		return err
	}
	n.origDev = n.device
	return nil
}

// forEachField walks the fields of message b, calling fn with each field's
// number, wire type and value bytes (for bytes fields, the payload; for
// varints, the encoded varint).
func forEachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return fmt.Errorf("%w: %w", ErrMalformed, protowire.ParseError(tl))
		}
		vl := protowire.ConsumeFieldValue(num, typ, b[tl:])
		if vl < 0 {
			return fmt.Errorf("%w: field %d: %w", ErrMalformed, num, protowire.ParseError(vl))
		}
		v := b[tl : tl+vl]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v)
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[tl+vl:]
	}
	return nil
}

func wantType(num protowire.Number, got, want protowire.Type, what string) error {
	if got != want {
		return fmt.Errorf("%w: %s field %d has wire type %d, want %d", ErrMalformed, what, num, got, want)
	}
	return nil
}

func varint(v []byte) int64 {
	x, _ := protowire.ConsumeVarint(v)
	return int64(x)
}

func (d *decoder) mapEntry(b []byte, depth int) (Attr, error) {
	var a Attr
	err := forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case fMapKey:
			if err := wantType(num, typ, protowire.BytesType, "attr entry"); err != nil {
				return err
			}
			a.Name = d.s(v)
		case fMapValue:
			if err := wantType(num, typ, protowire.BytesType, "attr entry"); err != nil {
				return err
			}
			av, err := d.attrValue(v, depth)
			if err != nil {
				return fmt.Errorf("attr %q: %w", a.Name, err)
			}
			a.Value = av
		}
		return nil
	})
	return a, err
}

func (d *decoder) attrValue(b []byte, depth int) (AttrValue, error) {
	var av AttrValue
	err := forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		want := protowire.BytesType
		switch num {
		case fAttrI, fAttrB, fAttrType:
			want = protowire.VarintType
		case fAttrF:
			want = protowire.Fixed32Type
		case fAttrList, fAttrS, fAttrShape, fAttrTensor, fAttrPH, fAttrFunc:
		default:
			return nil // unknown field: ignored here, kept in the node's bytes
		}
		if err := wantType(num, typ, want, "attrvalue"); err != nil {
			return err
		}
		switch num {
		case fAttrList:
			av.Kind = AttrList
			if err := d.charge(sizeOf[List]()); err != nil {
				return err
			}
			l, err := d.list(v)
			if err != nil {
				return err
			}
			av.List = &l
		case fAttrS:
			av.Kind, av.S = AttrString, d.s(v)
		case fAttrI:
			av.Kind, av.I = AttrInt, varint(v)
		case fAttrF:
			x, _ := protowire.ConsumeFixed32(v)
			av.Kind, av.F = AttrFloat, math.Float32frombits(x)
		case fAttrB:
			av.Kind, av.B = AttrBool, varint(v) != 0
		case fAttrType:
			av.Kind, av.Type = AttrType, DataType(varint(v))
		case fAttrShape:
			s, err := d.shape(v)
			if err != nil {
				return err
			}
			av.Kind, av.Shape = AttrShape, s
		case fAttrTensor:
			dt, sh, err := d.tensor(v)
			if err != nil {
				return err
			}
			av.Kind, av.Type, av.Shape = AttrTensor, dt, sh
		case fAttrPH:
			av.Kind, av.S = AttrPlaceholder, d.s(v)
		case fAttrFunc:
			if depth+1 > d.lim.MaxDepth {
				return fmt.Errorf("%w: func attrs nested deeper than %d", ErrLimit, d.lim.MaxDepth)
			}
			av.Kind = AttrFunc
			if err := d.charge(sizeOf[[]Attr]()); err != nil {
				return err
			}
			av.S, av.Func = "", new([]Attr)
			return forEachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch num {
				case fNameAttrName:
					if err := wantType(num, typ, protowire.BytesType, "func"); err != nil {
						return err
					}
					av.S = d.s(v)
				case fNameAttrAttr:
					if err := wantType(num, typ, protowire.BytesType, "func"); err != nil {
						return err
					}
					if len(*av.Func) >= d.lim.MaxAttrsPerNode {
						return fmt.Errorf("%w: more than %d func attrs", ErrLimit, d.lim.MaxAttrsPerNode)
					}
					a, err := d.mapEntry(v, depth+1)
					if err != nil {
						return err
					}
					return push(d, av.Func, a)
				}
				return nil
			})
		}
		return nil
	})
	return av, err
}

func (d *decoder) list(b []byte) (List, error) {
	var l List
	err := forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case fListType, fListI:
			switch typ {
			case protowire.VarintType:
				if num == fListType {
					return push(d, &l.Types, DataType(int32(varint(v))))
				}
				return push(d, &l.Ints, varint(v))
			case protowire.BytesType: // packed
				// Sized from the input: a varint ends at each byte under 0x80.
				n := 0
				for _, c := range v {
					if c < 0x80 {
						n++
					}
				}
				if num == fListType {
					if err := reserve(d, &l.Types, n); err != nil {
						return err
					}
				} else if err := reserve(d, &l.Ints, n); err != nil {
					return err
				}
				for len(v) > 0 {
					x, n := protowire.ConsumeVarint(v)
					if n < 0 {
						return fmt.Errorf("%w: packed list: %w", ErrMalformed, protowire.ParseError(n))
					}
					if num == fListType {
						l.Types = append(l.Types, DataType(int32(x)))
					} else {
						l.Ints = append(l.Ints, int64(x))
					}
					v = v[n:]
				}
			default:
				return wantType(num, typ, protowire.VarintType, "list")
			}
		case fListShape:
			if err := wantType(num, typ, protowire.BytesType, "list"); err != nil {
				return err
			}
			s, err := d.shape(v)
			if err != nil {
				return err
			}
			return push(d, &l.Shapes, s)
		default:
			l.Other++
		}
		return nil
	})
	return l, err
}

// reserve makes room for n more elements in *s, charging d for the new
// backing array, which holds exactly the elements so far and n more.
func reserve[T any](d *decoder, s *[]T, n int) error {
	if cap(*s)-len(*s) >= n {
		return nil
	}
	if err := d.charge((len(*s) + n) * sizeOf[T]()); err != nil {
		return err
	}
	grown := make([]T, len(*s), len(*s)+n)
	copy(grown, *s)
	*s = grown
	return nil
}

func (d *decoder) shape(b []byte) (Shape, error) {
	var s Shape
	d.dims = d.dims[:0]
	err := forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case fShapeDim:
			if err := wantType(num, typ, protowire.BytesType, "shape"); err != nil {
				return err
			}
			size := int64(0)
			err := forEachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num == fDimSize {
					if err := wantType(num, typ, protowire.VarintType, "dim"); err != nil {
						return err
					}
					size = varint(v)
				}
				return nil
			})
			if err != nil {
				return err
			}
			return push(d, &d.dims, size)
		case fShapeUnknown:
			if err := wantType(num, typ, protowire.VarintType, "shape"); err != nil {
				return err
			}
			s.UnknownRank = varint(v) != 0
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	s.Dims, err = carve(d, &d.dimArena, d.dims)
	return s, err
}

func (d *decoder) tensor(b []byte) (DataType, Shape, error) {
	var dt DataType
	var sh Shape
	err := forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch num {
		case fTensorDtype:
			if err := wantType(num, typ, protowire.VarintType, "tensor"); err != nil {
				return err
			}
			dt = DataType(varint(v))
		case fTensorShape:
			if err := wantType(num, typ, protowire.BytesType, "tensor"); err != nil {
				return err
			}
			s, err := d.shape(v)
			if err != nil {
				return err
			}
			sh = s
		}
		return nil
	})
	return dt, sh, err
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

// Encode serializes the graph. Unchanged bytes are copied from the input.
func (g *Graph) Encode() []byte {
	out := make([]byte, 0, len(g.raw)+64)
	for _, f := range g.fields {
		if f.node == nil || !f.node.changed {
			out = append(out, g.raw[f.start:f.end]...)
			continue
		}
		out = append(out, g.raw[f.start:f.start+int32(f.node.tagLen)]...)
		out = f.node.appendPayload(out)
	}
	return out
}

// appendPayload appends the length-prefixed NodeDef with the device field
// replaced: the last device field is rewritten in place (earlier duplicates,
// which protobuf ignores, are kept), or one is inserted in field order.
func (n *Node) appendPayload(out []byte) []byte {
	last := -1
	for i, f := range n.fields {
		if f.num == fNodeDevice {
			last = i
		}
	}
	devField := func(b []byte) []byte {
		if n.device == "" {
			return b
		}
		b = protowire.AppendTag(b, fNodeDevice, protowire.BytesType)
		return protowire.AppendString(b, n.device)
	}
	devLen := 0
	if n.device != "" {
		devLen = protowire.SizeTag(fNodeDevice) + protowire.SizeBytes(len(n.device))
	}
	size := len(n.raw) + devLen
	insertAt := -1
	if last >= 0 {
		size -= int(n.fields[last].end - n.fields[last].start)
	} else {
		insertAt = len(n.fields)
		for i, f := range n.fields {
			if f.num > fNodeDevice {
				insertAt = i
				break
			}
		}
	}
	out = protowire.AppendVarint(out, uint64(size))
	for i, f := range n.fields {
		if i == insertAt {
			out = devField(out)
		}
		if i == last {
			out = devField(out)
			continue
		}
		out = append(out, n.raw[f.start:f.end]...)
	}
	if insertAt == len(n.fields) {
		out = devField(out)
	}
	return out
}
