package sim

// A reservation's granules are held sparsely, in chunks that exist only
// while one of their granules is mapped. A slice of size/granularity
// entries made every AddressReserve cost its size: devalloc's expandable
// segments reserve the whole capacity per stream (4,096 granules of 2 MiB
// for 8 GiB, 64 KiB of entries that the garbage collector then scanned),
// and a 64 TiB reservation at a 4 KiB granularity asked for 256 GiB. Now a
// reservation costs nothing until mapped, its memory follows the granules
// mapped, and AddressFree knows in O(1) whether any still is.

// chunkGranules is the granules per chunk: a chunk of 64 is 1 KiB, one
// allocation per 128 MiB mapped at the default 2 MiB granularity, and a
// range check makes one map lookup per 64 granules.
const chunkGranules = 64

// granule is one Granularity-sized page of a VMM reservation.
type granule struct {
	h      *memHandle // mapped physical memory; nil when unmapped
	access bool       // SetAccess granted read-write
}

type granuleChunk struct {
	g      [chunkGranules]granule
	mapped int // granules of g with h set
}

// granules holds a reservation's mapped granules by index; an absent one
// is unmapped. The zero value has none. Guarded by the table's mu, as the
// region it belongs to.
type granules struct {
	chunks map[int]*granuleChunk // by index / chunkGranules; present while mapped > 0
	mapped int                   // granules mapped in all
}

// at returns granule i.
func (gs *granules) at(i int) granule {
	if c := gs.chunks[i/chunkGranules]; c != nil {
		return c.g[i%chunkGranules]
	}
	return granule{}
}

// set replaces granule i. An unmapped granule (h nil) must have no access.
func (gs *granules) set(i int, g granule) {
	k := i / chunkGranules
	c := gs.chunks[k]
	if c == nil {
		if g.h == nil {
			return // unmapped already
		}
		if gs.chunks == nil {
			gs.chunks = make(map[int]*granuleChunk)
		}
		c = &granuleChunk{}
		gs.chunks[k] = c
	}
	old := &c.g[i%chunkGranules]
	switch {
	case old.h == nil && g.h != nil:
		c.mapped++
		gs.mapped++
	case old.h != nil && g.h == nil:
		c.mapped--
		gs.mapped--
	}
	*old = g
	if c.mapped == 0 {
		delete(gs.chunks, k)
	}
}

// firstWhere returns the first index in [first, last) whose granule is
// mapped (mapped true) or unmapped (false), and whether there is one. An
// absent chunk is skipped whole.
func (gs *granules) firstWhere(first, last int, mapped bool) (int, bool) {
	for i := first; i < last; {
		k := i / chunkGranules
		end := min(last, (k+1)*chunkGranules)
		c := gs.chunks[k]
		if c == nil {
			if !mapped {
				return i, true
			}
			i = end
			continue
		}
		for ; i < end; i++ {
			if (c.g[i%chunkGranules].h != nil) == mapped {
				return i, true
			}
		}
	}
	return 0, false
}

// accessible reports whether granules [first, last) are all mapped with
// access granted.
func (gs *granules) accessible(first, last int) bool {
	for i := first; i < last; {
		k := i / chunkGranules
		end := min(last, (k+1)*chunkGranules)
		c := gs.chunks[k]
		if c == nil {
			return false
		}
		for ; i < end; i++ {
			if g := c.g[i%chunkGranules]; g.h == nil || !g.access {
				return false
			}
		}
	}
	return true
}
