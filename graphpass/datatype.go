package graphpass

import "strconv"

// DataType is TensorFlow's DataType enum (tensorflow/core/framework/
// types.proto). Only the values the passes reason about are named; any
// other value is carried through unchanged.
type DataType int32

// DataType values from types.proto. Reference types are the base value +100.
const (
	DTInvalid    DataType = 0
	DTFloat      DataType = 1
	DTDouble     DataType = 2
	DTInt32      DataType = 3
	DTUint8      DataType = 4
	DTInt16      DataType = 5
	DTInt8       DataType = 6
	DTString     DataType = 7
	DTComplex64  DataType = 8
	DTInt64      DataType = 9
	DTBool       DataType = 10
	DTQint8      DataType = 11
	DTQuint8     DataType = 12
	DTQint32     DataType = 13
	DTBfloat16   DataType = 14
	DTQint16     DataType = 15
	DTQuint16    DataType = 16
	DTUint16     DataType = 17
	DTComplex128 DataType = 18
	DTHalf       DataType = 19
	DTResource   DataType = 20
	DTVariant    DataType = 21
	DTUint32     DataType = 22
	DTUint64     DataType = 23
	dtRefOffset  DataType = 100
)

var dtNames = map[DataType]string{
	DTFloat: "float", DTDouble: "double", DTInt32: "int32", DTUint8: "uint8",
	DTInt16: "int16", DTInt8: "int8", DTString: "string", DTComplex64: "complex64",
	DTInt64: "int64", DTBool: "bool", DTQint8: "qint8", DTQuint8: "quint8",
	DTQint32: "qint32", DTBfloat16: "bfloat16", DTQint16: "qint16", DTQuint16: "quint16",
	DTUint16: "uint16", DTComplex128: "complex128", DTHalf: "half", DTResource: "resource",
	DTVariant: "variant", DTUint32: "uint32", DTUint64: "uint64",
}

func (t DataType) String() string {
	if t > dtRefOffset {
		return t.Base().String() + "_ref"
	}
	if s, ok := dtNames[t]; ok {
		return s
	}
	return "DataType(" + strconv.Itoa(int(t)) + ")"
}

// Base strips the reference flag.
func (t DataType) Base() DataType {
	if t > dtRefOffset {
		return t - dtRefOffset
	}
	return t
}

// IsInteger reports whether t is a plain (non-quantized) integer type.
func (t DataType) IsInteger() bool {
	switch t.Base() {
	case DTInt8, DTInt16, DTInt32, DTInt64, DTUint8, DTUint16, DTUint32, DTUint64:
		return true
	}
	return false
}

// hostFriendly reports whether values of t belong to shape arithmetic:
// integers, and bool for comparisons and logical ops. Never floating point.
func (t DataType) hostFriendly() bool { return t.IsInteger() || t.Base() == DTBool }
