package graphpass

// Reading a node's fields straight from its bytes, without decoding them:
// what passes use on the hot path (TypeAttr, the candidate and const checks
// of PinHostCompute, the edge index) and what Encode uses to rewrite a
// node, so a pass over a large graph allocates nothing per node. Decode
// checked every byte, so these readers skip error handling. Each reads as
// the decoder does: for a repeated scalar or message field the last
// occurrence wins, an AttrValue holds the member of its oneof set last, and
// unknown fields are skipped.

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// nextField splits the first field off checked message b: its number, its
// value (a bytes field's payload, or the encoded scalar), its length on the
// wire, and the rest of b. One-byte tags and lengths, the common case, are
// read inline.
func nextField(b []byte) (num protowire.Number, v []byte, n int, rest []byte) {
	var tag uint64
	tl := 1
	if b[0] < 0x80 {
		tag = uint64(b[0])
	} else {
		tag, tl = protowire.ConsumeVarint(b)
	}
	num = protowire.Number(tag >> 3)
	switch typ := protowire.Type(tag & 7); typ {
	case protowire.BytesType:
		l, ll := uint64(b[tl]), 1
		if l >= 0x80 {
			l, ll = protowire.ConsumeVarint(b[tl:])
		}
		start := tl + ll
		n = start + int(l)
		v = b[start:n]
	case protowire.VarintType:
		n = tl
		for b[n] >= 0x80 {
			n++
		}
		n++
		v = b[tl:n]
	default:
		n = tl + protowire.ConsumeFieldValue(num, typ, b[tl:])
		v = b[tl:n]
	}
	return num, v, n, b[n:]
}

// shortField splits the first field off checked message b when its tag
// is one byte and it is a bytes field with a one-byte length or a one-byte
// varint, the common cases: small enough to be inlined into the loops
// below, which fall back to nextField when ok is false.
func shortField(b []byte) (num protowire.Number, v, rest []byte, ok bool) {
	if len(b) < 2 || b[0] >= 0x80 || b[1] >= 0x80 {
		return 0, nil, nil, false
	}
	switch b[0] & 7 {
	case 2:
		end := 2 + int(b[1])
		return protowire.Number(b[0] >> 3), b[2:end], b[end:], true
	case 0:
		return protowire.Number(b[0] >> 3), b[1:2], b[2:], true
	}
	return 0, nil, nil, false
}

// lastField returns the value of the last field numbered num in b.
func lastField(b []byte, num protowire.Number) (v []byte, ok bool) {
	for len(b) > 0 {
		n, fv, rest, short := shortField(b)
		if !short {
			n, fv, _, rest = nextField(b)
		}
		if n == num {
			v, ok = fv, true
		}
		b = rest
	}
	return v, ok
}

// nextAttr returns the key and AttrValue bytes of the first attr entry in
// NodeDef bytes b, and the bytes after it; ok is false when there is none.
func nextAttr(b []byte) (key, value, rest []byte, ok bool) {
	for len(b) > 0 {
		num, entry, r, short := shortField(b)
		if !short {
			num, entry, _, r = nextField(b)
		}
		b = r
		if num != fNodeAttr {
			continue
		}
		for len(entry) > 0 {
			n, v, er, short := shortField(entry)
			if !short {
				n, v, _, er = nextField(entry)
			}
			switch n {
			case fMapKey:
				key = v
			case fMapValue:
				value = v
			}
			entry = er
		}
		return key, value, b, true
	}
	return nil, nil, nil, false
}

// attrValueBytes returns the AttrValue bytes of n's last attr named name.
func (n *Node) attrValueBytes(name string) (value []byte, ok bool) {
	for b := n.bytes(); ; {
		key, v, rest, more := nextAttr(b)
		if !more {
			return value, ok
		}
		if string(key) == name {
			value, ok = v, true
		}
		b = rest
	}
}

// lastValueField returns the member of AttrValue b that is set (its last
// known field) and that member's value; 0 when none is.
func lastValueField(b []byte) (num protowire.Number, v []byte) {
	for len(b) > 0 {
		n, fv, rest, short := shortField(b)
		if !short {
			n, fv, _, rest = nextField(b)
		}
		if n >= fAttrList && n <= fAttrFunc {
			num, v = n, fv
		}
		b = rest
	}
	return num, v
}

// listTypesHostFriendly reports whether ListValue b holds types and
// whether they are all host friendly.
func listTypesHostFriendly(b []byte) (seen, ok bool) {
	ok = true
	for len(b) > 0 {
		num, v, rest, short := shortField(b)
		if !short {
			num, v, _, rest = nextField(b)
		}
		b = rest
		if num != fListType {
			continue
		}
		for len(v) > 0 { // one varint, or packed ones
			x, n := protowire.ConsumeVarint(v)
			seen = true
			if !DataType(int32(x)).hostFriendly() {
				return true, false
			}
			v = v[n:]
		}
	}
	return seen, ok
}

// tensorDtype returns the dtype of TensorProto b.
func tensorDtype(b []byte) DataType {
	v, _ := lastField(b, fTensorDtype)
	return DataType(varint(v))
}

// tensorElements returns the element count of TensorProto b's shape, as
// Shape.NumElements does for the decoded shape: -1 when unknown.
func tensorElements(b []byte) int64 {
	shape, _ := lastField(b, fTensorShape)
	n, unknown := int64(1), false
	for len(shape) > 0 {
		num, v, rest, short := shortField(shape)
		if !short {
			num, v, _, rest = nextField(shape)
		}
		shape = rest
		switch num {
		case fShapeDim:
			size, _ := lastField(v, fDimSize)
			d := varint(size)
			switch {
			case n < 0:
			case d < 0, d != 0 && n > math.MaxInt64/d:
				n = -1
			default:
				n *= d
			}
		case fShapeUnknown:
			unknown = varint(v) != 0
		}
	}
	if unknown {
		return -1
	}
	return n
}

// str returns the string for v, a sub-slice of g.buf, without copying.
func (g *Graph) str(v []byte) string {
	at := cap(g.buf) - cap(v)
	return g.raw[at : at+len(v)]
}

// decodedDevice returns the device n was decoded with (its last device
// field), or "".
func (n *Node) decodedDevice() string {
	if n.devField < 0 {
		return ""
	}
	b := n.g.buf[n.devField:]
	_, v, _, short := shortField(b)
	if !short {
		_, v, _, _ = nextField(b)
	}
	return n.g.str(v)
}

// deviceField returns where n's device field is in g.raw and its length
// on the wire: the last one, or, when there is none, where one goes with
// length 0.
func (n *Node) deviceField() (at, length int) {
	if n.devField < 0 {
		return int(-1 - n.devField), 0
	}
	b := n.g.buf[n.devField:]
	if _, _, rest, short := shortField(b); short {
		return int(n.devField), len(b) - len(rest)
	}
	_, _, fl, _ := nextField(b)
	return int(n.devField), fl
}

// nextInput returns the first input in NodeDef bytes b and the bytes after
// it; ok is false when there is none.
func (g *Graph) nextInput(b []byte) (in string, rest []byte, ok bool) {
	for len(b) > 0 {
		num, v, r, short := shortField(b)
		if !short {
			num, v, _, r = nextField(b)
		}
		if num == fNodeInput {
			return g.str(v), r, true
		}
		b = r
	}
	return "", nil, false
}

// dataInputs returns the number of n's data (not control) inputs, read
// from its bytes.
func (n *Node) dataInputs() int {
	k := 0
	for b := n.bytes(); ; {
		in, rest, ok := n.g.nextInput(b)
		if !ok {
			return k
		}
		if !ParseInput(in).Control {
			k++
		}
		b = rest
	}
}

// countInputs returns the number of input fields (data and control) in
// NodeDef bytes b.
func countInputs(b []byte) int {
	k := 0
	for len(b) > 0 {
		num, _, rest, short := shortField(b)
		if !short {
			num, _, _, rest = nextField(b)
		}
		if num == fNodeInput {
			k++
		}
		b = rest
	}
	return k
}
