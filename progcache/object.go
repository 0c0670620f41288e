package progcache

import (
	"maps"
	"slices"
)

// Object is one compiled program: what a cache stores under a key.
// Caches never interpret Code; nothing is deserialised by reflection or
// executed.
type Object struct {
	// Kind is the code format: "cubin", "ptx", "ltoir", "fatbin", "hsaco",
	// "elf" or any other string.
	Kind string
	// Name is the program's name (e.g. NVRTC's program name).
	Name string
	// Code is the object code.
	Code []byte
	// Symbols maps name expressions to lowered (mangled) names.
	Symbols map[string]string
	// Metadata holds free-form string facts (compile log summary, flags).
	Metadata map[string]string
}

// Size is the number of bytes the object accounts for in an in-memory
// cache's byte cap: its code, kind, name, and symbol and metadata strings.
func (o Object) Size() int64 {
	n := int64(len(o.Code) + len(o.Kind) + len(o.Name))
	for k, v := range o.Symbols {
		n += int64(len(k) + len(v))
	}
	for k, v := range o.Metadata {
		n += int64(len(k) + len(v))
	}
	return n
}

// Equal reports whether o and p hold the same kind, name, code, symbols
// and metadata (a nil and an empty map are equal).
func (o Object) Equal(p Object) bool {
	return o.Kind == p.Kind && o.Name == p.Name && string(o.Code) == string(p.Code) &&
		maps.Equal(o.Symbols, p.Symbols) && maps.Equal(o.Metadata, p.Metadata)
}

// Clone returns a deep copy of o.
func (o Object) Clone() Object {
	o.Code = slices.Clone(o.Code)
	o.Symbols = maps.Clone(o.Symbols)
	o.Metadata = maps.Clone(o.Metadata)
	return o
}
