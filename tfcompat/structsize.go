package tfcompat

// The struct_size rule shared by the PJRT and StreamExecutor C APIs.
//
// Both APIs only ever append members to a struct (xla/pjrt/c/pjrt_c_api.h:
// "Always add new fields to the end of the struct"; the StreamExecutor C API
// versioning strategy in tensorflow/community), and each struct's first
// member, struct_size, is set by the writer to the offset of the end of the
// last member it knows (PJRT_STRUCT_SIZE, TF_OFFSET_OF_END). A reader that
// knows the struct as `known` bytes can therefore take any struct_size at or
// above known (the writer is newer; the reader ignores the tail) and must
// refuse one below it, since the members past struct_size are not there.
// XLA's plugin wrapper applies this to every args struct a framework passes
// (ActualStructSizeIsGreaterOrEqual at the top of each entry point in
// xla/pjrt/c/pjrt_c_api_wrapper_impl.cc): a framework built against an
// older header than the plugin fails with "Unexpected ..._Args size:
// expected N, got M" (aws-neuron/aws-neuron-sdk#1095).

import (
	"errors"
	"fmt"
)

// ErrStructSize is returned (wrapped, in a *StructSizeError) by
// CheckStructSize.
var ErrStructSize = errors.New("tfcompat: struct_size smaller than the reader knows")

// StructSizeError is a struct_size below the size its reader knows.
type StructSizeError struct {
	Struct string // the C struct, e.g. PJRT_Plugin_Attributes_Args
	Got    int    // the struct_size the writer set
	Known  int    // the size the reader was built with
}

func (e *StructSizeError) Error() string {
	if e.Got == 0 {
		return fmt.Sprintf("%v: %s struct_size is 0 (unset); the writer must set it to the size of the struct it was built with, at least %d here",
			ErrStructSize, e.Struct, e.Known)
	}
	return fmt.Sprintf("%v: %s struct_size %d < %d: the writer was built against an older header than the reader (members are only appended, so a struct may be larger than the reader knows, never smaller); rebuild the older side against the newer header",
		ErrStructSize, e.Struct, e.Got, e.Known)
}

func (e *StructSizeError) Unwrap() error { return ErrStructSize }

// CheckStructSize applies the C APIs' struct_size rule: got, the
// struct_size a writer set on structName, may be larger than known, the
// size its reader was built with, never smaller. It returns nil or a
// *StructSizeError wrapping ErrStructSize; a negative known is treated as 0.
func CheckStructSize(structName string, got, known int) error {
	known = max(known, 0)
	if got > 0 && got >= known {
		return nil
	}
	return &StructSizeError{Struct: structName, Got: got, Known: known}
}
