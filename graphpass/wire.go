package graphpass

// The GraphDef wire schema the codec reads: field numbers and the helpers
// that walk protobuf fields (protowire does the byte-level work).
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

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

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

// consumeField checks and splits off the first field of message b: its
// number, wire type, value (for bytes fields, the payload; for varints,
// the encoded varint) and length on the wire. A one-byte tag with a
// one-byte length or a one-byte varint, the common case, is checked here,
// inlined into the walker's loops; anything else goes through
// consumeFieldSlow.
func consumeField(b []byte) (num protowire.Number, typ protowire.Type, v []byte, n int, err error) {
	if len(b) >= 2 && b[0] < 0x80 && b[0] >= 1<<3 && b[1] < 0x80 {
		l := int(b[1])
		switch protowire.Type(b[0] & 7) {
		case protowire.BytesType:
			if l <= len(b)-2 {
				return protowire.Number(b[0] >> 3), protowire.BytesType, b[2 : 2+l], 2 + l, nil
			}
		case protowire.VarintType:
			return protowire.Number(b[0] >> 3), protowire.VarintType, b[1:2], 2, nil
		}
	}
	return consumeFieldSlow(b)
}

// consumeFieldSlow is consumeField through protowire, whose errors it
// returns wrapped in ErrMalformed.
func consumeFieldSlow(b []byte) (num protowire.Number, typ protowire.Type, v []byte, n int, err error) {
	num, typ, tl := protowire.ConsumeTag(b)
	if tl < 0 {
		return 0, 0, nil, 0, fmt.Errorf("%w: %w", ErrMalformed, protowire.ParseError(tl))
	}
	vl := protowire.ConsumeFieldValue(num, typ, b[tl:])
	if vl < 0 {
		return 0, 0, nil, 0, fmt.Errorf("%w: field %d: %w", ErrMalformed, num, protowire.ParseError(vl))
	}
	v = b[tl : tl+vl]
	if typ == protowire.BytesType {
		v, _ = protowire.ConsumeBytes(v)
	}
	return num, typ, v, tl + vl, nil
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
