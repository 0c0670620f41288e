package devalloc

import "github.com/accelkit/accelkit/driver"

// blockSet is the free set of one (stream, pool): blocks ordered by (size,
// address), so the first entry not below (size, 0) is the best fit, and
// among equal sizes the lowest address wins (as in PyTorch's std::set with
// BlockComparatorSize).
//
// It is a two-level sorted slice: a sorted list of chunks, each a sorted
// slice of at most chunkMax entries with the key stored inline (no pointer
// chase while searching). Lookup is two binary searches; insert and delete
// move at most chunkMax entries. With 10k blocks that is ~80 chunks: far
// cheaper than a balanced tree's allocations and pointer chasing, and
// simpler. Not safe for concurrent use: the owning freeSet's mutex guards it.
type blockSet struct {
	chunks [][]setEntry
	n      int
	// spare is the last chunk emptied, kept so that a set that drains and
	// refills (the warm single-size case: take the only block, free it
	// back) does not allocate a chunk per insert.
	spare []setEntry
}

// chunkMax bounds a chunk: small enough that an insert's memmove stays
// within a few cache lines' worth of work per entry, large enough that the
// chunk index stays short (n/chunkMax*2 entries at worst).
const chunkMax = 128

type setEntry struct {
	size uint64
	ptr  driver.Ptr
	b    *block
}

func entryLess(e setEntry, size uint64, ptr driver.Ptr) bool {
	return e.size < size || e.size == size && e.ptr < ptr
}

// chunkFor returns the first chunk whose last entry is not below the key,
// or len(chunks).
func (s *blockSet) chunkFor(size uint64, ptr driver.Ptr) int {
	lo, hi := 0, len(s.chunks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		c := s.chunks[m]
		if entryLess(c[len(c)-1], size, ptr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func searchChunk(c []setEntry, size uint64, ptr driver.Ptr) int {
	lo, hi := 0, len(c)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if entryLess(c[m], size, ptr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// lowerBound returns the first block not below (size, ptr), or nil.
func (s *blockSet) lowerBound(size uint64, ptr driver.Ptr) *block {
	ci := s.chunkFor(size, ptr)
	if ci == len(s.chunks) {
		return nil
	}
	c := s.chunks[ci]
	return c[searchChunk(c, size, ptr)].b
}

// largest returns the largest block, or nil.
func (s *blockSet) largest() *block {
	if len(s.chunks) == 0 {
		return nil
	}
	c := s.chunks[len(s.chunks)-1]
	return c[len(c)-1].b
}

func (s *blockSet) insert(b *block) {
	e := setEntry{b.size, b.ptr, b}
	s.n++
	if len(s.chunks) == 0 {
		c := s.spare
		s.spare = nil
		if c == nil {
			c = make([]setEntry, 0, chunkMax)
		}
		s.chunks = append(s.chunks, append(c, e))
		return
	}
	ci := s.chunkFor(e.size, e.ptr)
	if ci == len(s.chunks) {
		ci--
	}
	c := s.chunks[ci]
	i := searchChunk(c, e.size, e.ptr)
	c = append(c, setEntry{})
	copy(c[i+1:], c[i:])
	c[i] = e
	if len(c) <= chunkMax {
		s.chunks[ci] = c
		return
	}
	half := len(c) / 2
	right := make([]setEntry, len(c)-half, chunkMax)
	copy(right, c[half:])
	clear(c[half:])
	s.chunks[ci] = c[:half]
	s.chunks = append(s.chunks, nil)
	copy(s.chunks[ci+2:], s.chunks[ci+1:])
	s.chunks[ci+1] = right
}

// remove deletes b, which must be in the set (its size and ptr unchanged
// since insert); it reports whether b was found.
func (s *blockSet) remove(b *block) bool {
	ci := s.chunkFor(b.size, b.ptr)
	if ci == len(s.chunks) {
		return false
	}
	c := s.chunks[ci]
	i := searchChunk(c, b.size, b.ptr)
	if i == len(c) || c[i].b != b {
		return false
	}
	copy(c[i:], c[i+1:])
	c[len(c)-1] = setEntry{}
	c = c[:len(c)-1]
	s.n--
	if len(c) == 0 {
		if cap(c) >= chunkMax {
			s.spare = c
		}
		copy(s.chunks[ci:], s.chunks[ci+1:])
		s.chunks[len(s.chunks)-1] = nil
		s.chunks = s.chunks[:len(s.chunks)-1]
		return true
	}
	s.chunks[ci] = c
	return true
}

// each calls fn for every block in order until fn returns false.
func (s *blockSet) each(fn func(b *block) bool) {
	for _, c := range s.chunks {
		for _, e := range c {
			if !fn(e.b) {
				return
			}
		}
	}
}
