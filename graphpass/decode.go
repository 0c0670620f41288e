package graphpass

// Decoding: a first pass (frame) checks the framing of the top-level fields
// and counts the nodes, so the node records are allocated once; the second
// walks every NodeDef completely (name, op, inputs, device, attrs down to
// list entries, dims and nested func attrs), checking it as a full decoder
// would and counting what decoding its inputs and attrs would allocate, but
// keeping only the node's record. The inputs and attrs themselves are
// decoded by the same walker when first asked for (detail.go), into arenas
// sized by those counts. Strings are substrings of the Graph's one copy of
// the input. Limits (limits.go) and the memory budget (alloc.go) bound the
// work: the budget is charged at Decode for everything the graph can ever
// allocate, decoded details included.

import (
	"fmt"
	"math"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// Decode decodes a serialized GraphDef with DefaultLimits.
func Decode(b []byte) (*Graph, error) { return DecodeLimits(b, Limits{}) }

// DecodeLimits decodes a serialized GraphDef within lim. Input beyond a
// limit, including input whose decoding would allocate more than
// lim.MaxAllocPerByte bytes per input byte, fails with ErrLimit; input that
// is not a GraphDef fails with ErrMalformed; a negative field of lim fails
// with ErrInvalidOption. Every byte is checked here: a Graph that decoded
// never fails later, when a node's inputs and attrs are decoded on first
// use.
func DecodeLimits(b []byte, lim Limits) (*Graph, error) {
	lim, err := lim.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(b) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrLimit, len(b), lim.MaxBytes)
	}
	nNodes, err := frame(b, lim)
	if err != nil {
		return nil, err
	}
	bud := budget{per: lim.MaxAllocPerByte, left: allocSlack}
	if per := lim.MaxAllocPerByte; len(b) > 0 && per > (math.MaxInt-allocSlack)/len(b) {
		bud.left = math.MaxInt
	} else {
		bud.left += per * len(b)
	}
	if err := bud.charge(nNodes * perNodeBytes); err != nil {
		return nil, fmt.Errorf("%d nodes in %d bytes: %w", nNodes, len(b), err)
	}
	g := &Graph{raw: string(b), nodes: make([]Node, nNodes)}
	g.buf = unsafe.Slice(unsafe.StringData(g.raw), len(g.raw))
	w := walker{buf: g.buf, str: g.raw, lim: lim}
	off, i := 0, 0
	for off < len(b) {
		// frame checked the framing.
		num, typ, tl := protowire.ConsumeTag(b[off:])
		if num != fGraphNode {
			off += tl + protowire.ConsumeFieldValue(num, typ, b[off+tl:])
			continue
		}
		size, ll := protowire.ConsumeVarint(b[off+tl:])
		n := &g.nodes[i]
		*n = Node{g: g, payload: int32(off + tl + ll), size: int32(size), idx: int32(i), lenLen: uint8(ll)}
		w.c = counts{}
		if err := w.node(n.bytes(), n); err != nil {
			return nil, fmt.Errorf("node %d (byte %d): %w", i, off, err)
		}
		if err := bud.charge(w.c.bytes()); err != nil {
			return nil, fmt.Errorf("node %d (byte %d): %w", i, off, err)
		}
		g.inputs += w.c.inputs
		off += tl + ll + int(size)
		i++
	}
	return g, nil
}

// frame checks the framing of the GraphDef's top-level fields (tags,
// lengths, the node field's wire type) and counts the nodes.
func frame(b []byte, lim Limits) (nodes int, err error) {
	off := 0
	for off < len(b) {
		num, typ, tl := protowire.ConsumeTag(b[off:])
		if tl < 0 {
			return 0, fmt.Errorf("%w: graphdef field at byte %d: %w", ErrMalformed, off, protowire.ParseError(tl))
		}
		vl := protowire.ConsumeFieldValue(num, typ, b[off+tl:])
		if vl < 0 {
			return 0, fmt.Errorf("%w: graphdef field %d at byte %d: %w", ErrMalformed, num, off, protowire.ParseError(vl))
		}
		if num == fGraphNode {
			if typ != protowire.BytesType {
				return 0, fmt.Errorf("%w: graphdef field node at byte %d has wire type %d, want bytes", ErrMalformed, off, typ)
			}
			if nodes >= lim.MaxNodes {
				return 0, fmt.Errorf("%w: more than %d nodes", ErrLimit, lim.MaxNodes)
			}
			nodes++
		}
		off += tl + vl
	}
	return nodes, nil
}

// walker walks one NodeDef at a time. Decode runs it to check a node, fill
// its record and count its items (fill false); detail.go runs it again to
// decode the node's inputs and attrs into arenas allocated from those
// counts (fill true), where every append fits, so sub-slices stay valid and
// nothing is copied twice.
type walker struct {
	buf []byte // the Graph's bytes; every walked slice is a sub-slice
	str string // the same bytes as a string, for substrings
	lim Limits
	c   counts // items seen in the current node

	fill bool
	// Arenas, used when fill is set: one node's worth, allocated exactly.
	inputs []string
	attrs  []Attr
	lists  []List
	types  []DataType
	ints   []int64
	shapes []Shape
	dims   []int64
	funcs  [][]Attr
}

// s returns the string for v, a sub-slice of w.buf, without copying.
func (w *walker) s(v []byte) string {
	off := cap(w.buf) - cap(v)
	return w.str[off : off+len(v)]
}

// at returns the offset of v, a sub-slice of w.buf, in w.buf.
func (w *walker) at(v []byte) int32 { return int32(cap(w.buf) - cap(v)) }

// node walks a NodeDef payload. With n non-nil (Decode) it records where
// the name, op and device field are in n; with w.fill it decodes the inputs and attrs
// into w's arenas, the node's attrs first and contiguous (nested func attrs
// follow them).
func (w *walker) node(b []byte, n *Node) error {
	name := ""
	nAttrs, attrBase := 0, len(w.attrs)
	var scratch Attr // receives each attr when not filling
	devField, insertAt := int32(-1), int32(-1)
	if w.fill {
		w.attrs = w.attrs[:attrBase+countFields(b, fNodeAttr)]
	}
	off := 0
	for off < len(b) {
		num, typ, v, fl, err := consumeField(b[off:])
		if err != nil {
			return nodeFieldError(b[off:])
		}
		if num > fNodeDevice && insertAt < 0 {
			insertAt = w.at(b[off:])
		}
		switch num {
		case fNodeName, fNodeOp, fNodeInput, fNodeDevice, fNodeAttr:
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: nodedef field %d has wire type %d, want bytes", ErrMalformed, num, typ)
			}
			switch num {
			case fNodeName:
				name = w.s(v)
				if n != nil {
					n.nameAt, n.nameLen = w.at(v), int32(len(v))
				}
			case fNodeOp:
				if n != nil {
					n.opAt, n.opLen = w.at(v), int32(len(v))
				}
			case fNodeInput:
				w.c.inputs++
				if w.fill {
					w.inputs = append(w.inputs, w.s(v))
				}
			case fNodeDevice:
				devField = w.at(b[off:])
			case fNodeAttr:
				if nAttrs >= w.lim.MaxAttrsPerNode {
					return fmt.Errorf("%w: more than %d attrs on node %q", ErrLimit, w.lim.MaxAttrsPerNode, name)
				}
				a := &scratch
				if w.fill {
					a = &w.attrs[attrBase+nAttrs]
				}
				if err := w.mapEntry(v, 0, a); err != nil {
					return err
				}
				w.c.attrs++
				nAttrs++
			}
		}
		off += fl
	}
	if n != nil {
		n.devField = devField
		if devField < 0 {
			if insertAt < 0 {
				insertAt = w.at(b[len(b):])
			}
			n.devField = -1 - insertAt
		}
	}
	return nil
}

// nodeFieldError returns the error for the malformed field that NodeDef
// bytes b start with.
func nodeFieldError(b []byte) error {
	num, typ, tl := protowire.ConsumeTag(b)
	if tl < 0 {
		return fmt.Errorf("%w: nodedef: %w", ErrMalformed, protowire.ParseError(tl))
	}
	vl := protowire.ConsumeFieldValue(num, typ, b[tl:])
	return fmt.Errorf("%w: nodedef field %d: %w", ErrMalformed, num, protowire.ParseError(vl))
}

// countFields returns how many fields numbered num message b holds. b has
// been checked.
func countFields(b []byte, num protowire.Number) int {
	n := 0
	for len(b) > 0 {
		got, typ, tl := protowire.ConsumeTag(b)
		vl := protowire.ConsumeFieldValue(got, typ, b[tl:])
		if got == num {
			n++
		}
		b = b[tl+vl:]
	}
	return n
}

// mapEntry decodes an attr map entry into *a (its arena slot, or a
// scratch Attr when not filling: written in place, not returned, as an
// Attr is large).
func (w *walker) mapEntry(b []byte, depth int, a *Attr) error {
	*a = Attr{}
	for len(b) > 0 {
		num, typ, v, n, err := consumeField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		switch num {
		case fMapKey:
			if typ != protowire.BytesType {
				return wantType(num, typ, protowire.BytesType, "attr entry")
			}
			a.Name = w.s(v)
		case fMapValue:
			if typ != protowire.BytesType {
				return wantType(num, typ, protowire.BytesType, "attr entry")
			}
			if err := w.attrValue(v, depth, &a.Value); err != nil {
				return fmt.Errorf("attr %q: %w", a.Name, err)
			}
		}
	}
	return nil
}

// attrValue decodes AttrValue b into *av.
func (w *walker) attrValue(b []byte, depth int, av *AttrValue) error {
	*av = AttrValue{}
	for len(b) > 0 {
		num, typ, v, n, err := consumeField(b)
		if err != nil {
			return err
		}
		b = b[n:]
		want := protowire.BytesType
		switch num {
		case fAttrI, fAttrB, fAttrType:
			want = protowire.VarintType
		case fAttrF:
			want = protowire.Fixed32Type
		case fAttrList, fAttrS, fAttrShape, fAttrTensor, fAttrPH, fAttrFunc:
		default:
			continue // unknown field: ignored here, kept in the node's bytes
		}
		if typ != want {
			return wantType(num, typ, want, "attrvalue")
		}
		switch num {
		case fAttrList:
			av.Kind = AttrList
			l, err := w.list(v)
			if err != nil {
				return err
			}
			w.c.lists++
			if w.fill {
				w.lists = append(w.lists, l)
				av.List = &w.lists[len(w.lists)-1]
			}
		case fAttrS:
			av.Kind, av.S = AttrString, w.s(v)
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
			s, err := w.shape(v)
			if err != nil {
				return err
			}
			av.Kind, av.Shape = AttrShape, s
		case fAttrTensor:
			dt, sh, err := w.tensor(v)
			if err != nil {
				return err
			}
			av.Kind, av.Type, av.Shape = AttrTensor, dt, sh
		case fAttrPH:
			av.Kind, av.S = AttrPlaceholder, w.s(v)
		case fAttrFunc:
			if depth+1 > w.lim.MaxDepth {
				return fmt.Errorf("%w: func attrs nested deeper than %d", ErrLimit, w.lim.MaxDepth)
			}
			if err := w.funcValue(av, v, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

// funcValue decodes a NameAttrList into av: its attrs are contiguous in the
// attrs arena, reserved before their values (which may nest further funcs)
// are decoded.
func (w *walker) funcValue(av *AttrValue, b []byte, depth int) error {
	av.Kind, av.S = AttrFunc, ""
	w.c.funcs++
	var fattrs []Attr
	var scratch Attr // receives each attr when not filling
	n, base := 0, len(w.attrs)
	if w.fill {
		k := countFields(b, fNameAttrAttr)
		w.attrs = w.attrs[:base+k]
		fattrs = w.attrs[base : base+k : base+k]
		w.funcs = append(w.funcs, nil)
		av.Func = &w.funcs[len(w.funcs)-1]
	}
	for len(b) > 0 {
		num, typ, v, fl, err := consumeField(b)
		if err != nil {
			return err
		}
		b = b[fl:]
		switch num {
		case fNameAttrName:
			if err := wantType(num, typ, protowire.BytesType, "func"); err != nil {
				return err
			}
			av.S = w.s(v)
		case fNameAttrAttr:
			if err := wantType(num, typ, protowire.BytesType, "func"); err != nil {
				return err
			}
			if n >= w.lim.MaxAttrsPerNode {
				return fmt.Errorf("%w: more than %d func attrs", ErrLimit, w.lim.MaxAttrsPerNode)
			}
			a := &scratch
			if w.fill {
				a = &fattrs[n]
			}
			if err := w.mapEntry(v, depth+1, a); err != nil {
				return err
			}
			w.c.attrs++
			n++
		}
	}
	if w.fill && n > 0 {
		*av.Func = fattrs
	}
	return nil
}

// list decodes a ListValue's types, ints and shapes, each contiguous in its
// arena (a list holds no nested list), and counts its other entries.
func (w *walker) list(b []byte) (List, error) {
	var l List
	types, ints, shapes := len(w.types), len(w.ints), len(w.shapes)
	for len(b) > 0 {
		num, typ, v, n, err := consumeField(b)
		if err != nil {
			return l, err
		}
		b = b[n:]
		switch num {
		case fListType, fListI:
			switch typ {
			case protowire.VarintType:
				w.listEntry(num, uint64(varint(v)))
			case protowire.BytesType: // packed
				for len(v) > 0 {
					x, n := protowire.ConsumeVarint(v)
					if n < 0 {
						return l, fmt.Errorf("%w: packed list: %w", ErrMalformed, protowire.ParseError(n))
					}
					w.listEntry(num, x)
					v = v[n:]
				}
			default:
				return l, wantType(num, typ, protowire.VarintType, "list")
			}
		case fListShape:
			if err := wantType(num, typ, protowire.BytesType, "list"); err != nil {
				return l, err
			}
			s, err := w.shape(v)
			if err != nil {
				return l, err
			}
			w.c.shapes++
			if w.fill {
				w.shapes = append(w.shapes, s)
			}
		default:
			l.Other++
		}
	}
	if w.fill {
		l.Types, l.Ints, l.Shapes = tail(w.types, types), tail(w.ints, ints), tail(w.shapes, shapes)
	}
	return l, nil
}

// listEntry counts (and, filling, stores) one entry of a list's types or
// ints.
func (w *walker) listEntry(num protowire.Number, x uint64) {
	if num == fListType {
		w.c.types++
		if w.fill {
			w.types = append(w.types, DataType(int32(x)))
		}
		return
	}
	w.c.ints++
	if w.fill {
		w.ints = append(w.ints, int64(x))
	}
}

// tail returns a[from:], capped, or nil when it is empty (as a list or
// shape without entries decodes).
func tail[T any](a []T, from int) []T {
	if len(a) == from {
		return nil
	}
	return a[from:len(a):len(a)]
}

func (w *walker) shape(b []byte) (Shape, error) {
	var s Shape
	dims := len(w.dims)
	for len(b) > 0 {
		num, typ, v, n, err := consumeField(b)
		if err != nil {
			return s, err
		}
		b = b[n:]
		switch num {
		case fShapeDim:
			if err := wantType(num, typ, protowire.BytesType, "shape"); err != nil {
				return s, err
			}
			size := int64(0)
			for len(v) > 0 {
				num, typ, dv, n, err := consumeField(v)
				if err != nil {
					return s, err
				}
				v = v[n:]
				if num == fDimSize {
					if err := wantType(num, typ, protowire.VarintType, "dim"); err != nil {
						return s, err
					}
					size = varint(dv)
				}
			}
			w.c.dims++
			if w.fill {
				w.dims = append(w.dims, size)
			}
		case fShapeUnknown:
			if err := wantType(num, typ, protowire.VarintType, "shape"); err != nil {
				return s, err
			}
			s.UnknownRank = varint(v) != 0
		}
	}
	if w.fill {
		s.Dims = tail(w.dims, dims)
	}
	return s, nil
}

func (w *walker) tensor(b []byte) (DataType, Shape, error) {
	var dt DataType
	var sh Shape
	for len(b) > 0 {
		num, typ, v, n, err := consumeField(b)
		if err != nil {
			return dt, sh, err
		}
		b = b[n:]
		switch num {
		case fTensorDtype:
			if err := wantType(num, typ, protowire.VarintType, "tensor"); err != nil {
				return dt, sh, err
			}
			dt = DataType(varint(v))
		case fTensorShape:
			if err := wantType(num, typ, protowire.BytesType, "tensor"); err != nil {
				return dt, sh, err
			}
			s, err := w.shape(v)
			if err != nil {
				return dt, sh, err
			}
			sh = s
		}
	}
	return dt, sh, nil
}
