package graphpass

// Decoding: a first pass (frame) checks the framing of the top-level fields
// and counts them, so the Graph's records and nodes are allocated once;
// the second decodes each NodeDef's name, op, inputs, device and attrs,
// recording the byte range of every field for Encode. Strings are
// substrings of the Graph's one copy of the input. Limits (limits.go) and
// the memory budget (alloc.go) bound the work.

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// decoder holds one Decode call's state. Strings are substrings of str (one
// copy of the input) and small slices are carved from shared arenas, so a
// node costs a handful of allocations however many fields it has. Every
// allocation is charged to budget first (see alloc.go).
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
// is not a GraphDef fails with ErrMalformed; a negative field of lim fails
// with ErrInvalidOption.
func DecodeLimits(b []byte, lim Limits) (*Graph, error) {
	lim, err := lim.withDefaults()
	if err != nil {
		return nil, err
	}
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
