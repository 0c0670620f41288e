package graphpass

// Decoding's memory budget and arenas.
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
//
// The decoder's state (the budget, scratch buffers and arenas) is the
// decoder type in decode.go; this file holds what charges and carves it.

import (
	"fmt"
	"unsafe"
)

// allocSlack is the budget every input gets on top of MaxAllocPerByte per
// byte, so a graph of a few nodes decodes: the first scratch buffers and
// arena chunks cost a few hundred bytes each.
const allocSlack = 4 << 10

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
