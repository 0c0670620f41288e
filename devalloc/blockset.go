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
	// last[i] is the key of chunks[i]'s last entry, kept inline so the
	// chunk search reads one array instead of one cache line per chunk.
	last []setKey2
	n    int
	// spare is the last chunk emptied, kept so that a set that drains and
	// refills (the warm single-size case: take the only block, free it
	// back) does not allocate a chunk per insert.
	spare []setEntry
}

// chunkMax bounds a chunk: small enough that an insert's memmove stays
// within a few cache lines' worth of work per entry, large enough that the
// chunk index stays short (n/chunkMax*2 entries at worst).
const chunkMax = 128

type setKey2 struct {
	size uint64
	ptr  driver.Ptr
}

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
	lo, hi := 0, len(s.last)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if k := s.last[m]; k.size < size || k.size == size && k.ptr < ptr {
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
	ci, i := s.find(size, ptr)
	if ci == len(s.chunks) {
		return nil
	}
	return s.chunks[ci][i].b
}

// find returns the position (chunk, index) of the first entry not below
// (size, ptr); ci is len(chunks) when there is none. A position stays
// valid until the set changes, so a caller can look and then removeAt
// without searching twice.
func (s *blockSet) find(size uint64, ptr driver.Ptr) (ci, i int) {
	ci = s.chunkFor(size, ptr)
	if ci == len(s.chunks) {
		return ci, 0
	}
	return ci, searchChunk(s.chunks[ci], size, ptr)
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
		s.last = append(s.last, setKey2{e.size, e.ptr})
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
		if i == len(c)-1 {
			s.last[ci] = setKey2{e.size, e.ptr}
		}
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
	s.last = append(s.last, setKey2{})
	copy(s.last[ci+1:], s.last[ci:])
	l := c[half-1]
	s.last[ci] = setKey2{l.size, l.ptr}
	l = right[len(right)-1]
	s.last[ci+1] = setKey2{l.size, l.ptr}
}

// remove deletes b, which must be in the set (its size and ptr unchanged
// since insert); it reports whether b was found.
func (s *blockSet) remove(b *block) bool {
	ci, i := s.find(b.size, b.ptr)
	if ci == len(s.chunks) {
		return false
	}
	if c := s.chunks[ci]; i == len(c) || c[i].b != b {
		return false
	}
	s.removeAt(ci, i)
	return true
}

// removeAt deletes the entry at a position find returned.
func (s *blockSet) removeAt(ci, i int) {
	c := s.chunks[ci]
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
		copy(s.last[ci:], s.last[ci+1:])
		s.last = s.last[:len(s.last)-1]
		return
	}
	s.chunks[ci] = c
	if i == len(c) {
		l := c[i-1]
		s.last[ci] = setKey2{l.size, l.ptr}
	}
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
