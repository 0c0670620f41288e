package progcache

// Lending a stored object instead of copying it out.
//
// Get returns an Object that outlives the call, which for a persistent
// backend means a fresh buffer per hit (and strings and maps for its
// fields): the allocation and the GC work it causes were most of what a
// filestream hit cost beyond the file read. View lends the object to a
// callback instead. The bytes it sees live in a buffer the cache reuses
// (filestream, bolt) or are the stored object itself (Memory), so a hit
// allocates nothing; fields are decoded only when asked for.

import (
	"context"
	"encoding/binary"
)

// Viewer is a Cache that can lend a stored object to a callback without
// copying it out. Memory, filestream.Cache and bolt.Cache implement it; ViewFrom
// serves any Cache.
//
// View looks k up. On a hit it calls fn once with the object and returns
// (true, fn's error); on a miss it returns (false, nil) without calling fn.
// Hits, misses, corrupt and unreadable entries are counted and handled as
// Get does. The View and every slice it returns are valid only until fn
// returns, and must not be modified: copy what you keep (View.Object).
//
// fn runs with no lock of the cache held, so it may call any method of the
// same cache, View included, and Close. A Close that starts while fn runs
// (from fn or from another goroutine) does not wait for fn, nor does a
// call from fn wait for fn to return: each call fn makes either works as
// usual or fails with ErrClosed (after waiting at most for the operations
// Close itself waits for), and the View fn holds stays valid until fn
// returns. cachetest checks this with a timeout that reports a deadlock.
type Viewer interface {
	View(ctx context.Context, k Key, fn func(View) error) (bool, error)
}

// ViewFrom calls c.View when c is a Viewer, and otherwise lends fn the
// object c.Get returns, so code written against View works with any Cache.
func ViewFrom(ctx context.Context, c Cache, k Key, fn func(View) error) (bool, error) {
	if v, ok := c.(Viewer); ok {
		return v.View(ctx, k, fn)
	}
	obj, ok, err := c.Get(ctx, k)
	if !ok || err != nil {
		return ok, err
	}
	return true, fn(ViewOf(obj))
}

// View is a stored object lent to a Viewer's callback. Its accessors read
// the stored form; only Kind, Name, Symbol, Metadata and Object allocate
// (for the strings they return), and only when called. The zero View is an
// empty object.
type View struct {
	// The lent Object (Memory, ViewOf), when isObj: held by value, so
	// lending it allocates nothing.
	obj   Object
	isObj bool

	// The encoded record's fields (see record.go), when not isObj.
	kind, name []byte
	syms, meta []byte // map sections: u32 count, then the entries
	code       []byte
}

// ViewOf returns a View of obj, for a Viewer built on Objects (and for
// tests). The View shares obj's Code and maps: they must not change while
// the View is used.
func ViewOf(obj Object) View { return View{obj: obj, isObj: true} }

// Code returns the object code. It aliases the cache's buffer or the
// stored object: read it before the callback returns and do not modify it.
func (v View) Code() []byte {
	if v.isObj {
		return v.obj.Code
	}
	return v.code
}

// Kind returns the code format (Object.Kind).
func (v View) Kind() string {
	if v.isObj {
		return v.obj.Kind
	}
	return string(v.kind)
}

// Name returns the program's name (Object.Name).
func (v View) Name() string {
	if v.isObj {
		return v.obj.Name
	}
	return string(v.name)
}

// Symbol returns the lowered name stored for a name expression
// (Object.Symbols[expr]).
func (v View) Symbol(expr string) (string, bool) {
	if v.isObj {
		s, ok := v.obj.Symbols[expr]
		return s, ok
	}
	return lookupSection(v.syms, expr)
}

// Metadata returns one metadata value (Object.Metadata[name]).
func (v View) Metadata(name string) (string, bool) {
	if v.isObj {
		s, ok := v.obj.Metadata[name]
		return s, ok
	}
	return lookupSection(v.meta, name)
}

// Object returns a deep copy of the lent object, which outlives the
// callback.
func (v View) Object() Object { return v.object(true) }

// ObjectSharingCode returns the lent object with its strings and maps
// copied but its Code sharing the View's bytes, for a backend whose Get
// reads each record into a fresh buffer it never reuses: it saves a copy
// of the code. The bytes must then not change; use Object otherwise.
func (v View) ObjectSharingCode() Object { return v.object(false) }

// object returns the lent object; with clone false its Code aliases the
// view's bytes (DecodeRecord's contract).
func (v View) object(clone bool) Object {
	if v.isObj {
		if clone {
			return v.obj.Clone()
		}
		return v.obj
	}
	obj := Object{
		Kind:     string(v.kind),
		Name:     string(v.name),
		Symbols:  decodeSection(v.syms),
		Metadata: decodeSection(v.meta),
		Code:     v.code,
	}
	if clone {
		obj.Code = append([]byte(nil), v.code...)
	}
	return obj
}

// forEachEntry calls fn for each entry of a map section that parseRecord
// checked, until fn returns false.
func forEachEntry(sec []byte, fn func(name, value []byte) bool) {
	if len(sec) < 4 {
		return
	}
	n := binary.LittleEndian.Uint32(sec)
	sec = sec[4:]
	for range n {
		nl := int(binary.LittleEndian.Uint16(sec))
		name := sec[2 : 2+nl]
		sec = sec[2+nl:]
		vl := int(binary.LittleEndian.Uint32(sec))
		value := sec[4 : 4+vl]
		sec = sec[4+vl:]
		if !fn(name, value) {
			return
		}
	}
}

func lookupSection(sec []byte, name string) (value string, ok bool) {
	forEachEntry(sec, func(n, v []byte) bool {
		if string(n) == name {
			value, ok = string(v), true
			return false
		}
		return string(n) < name // names are sorted: stop once past it
	})
	return value, ok
}

func decodeSection(sec []byte) map[string]string {
	if len(sec) < 4 || binary.LittleEndian.Uint32(sec) == 0 {
		return nil
	}
	m := make(map[string]string, binary.LittleEndian.Uint32(sec))
	forEachEntry(sec, func(n, v []byte) bool {
		m[string(n)] = string(v)
		return true
	})
	return m
}
