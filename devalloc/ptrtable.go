package devalloc

import (
	"math/bits"

	"github.com/accelkit/accelkit/driver"
)

// ptrTable finds the live block at an address: the lookup of Free and
// RecordStream. It is an open-addressing hash table with linear probing,
// at most half full, whose entries are never deleted one by one: an entry
// maps an address to the block last allocated there, and it stands for a
// live allocation only while that block is still allocated at that
// address (liveAt). Freeing a block leaves its entry stale; the next
// allocation at the same address overwrites it in place, and stale entries
// are dropped all at once when the table would pass half full (rebuild).
// A cache hit reuses addresses, so an alloc+free pair costs one probe each
// and no deletion (the backward shift it replaced was half the table's
// cost). Not safe for concurrent use: Allocator.mu guards it, and liveAt
// reads the block under the same lock. Address 0 marks an empty slot; the
// allocator never stores it (Alloc(0) returns 0 without a block).
type ptrTable struct {
	slots []ptrSlot
	n     int  // used slots, live or stale
	shift uint // 64 - log2(len(slots))
}

type ptrSlot struct {
	p driver.Ptr
	b *block
}

const minPtrTable = 64

// liveAt reports whether b is the live allocation at p: a block is at one
// address at a time, and only an allocated block is live (a pending free
// is not: Free and RecordStream refuse it as they refuse a freed one).
func liveAt(p driver.Ptr, b *block) bool {
	return b.ptr == p && b.state == stateAllocated
}

// home is the slot p hashes to: Fibonacci hashing of the address above
// kMinBlockSize, whose low bits are always zero.
func (t *ptrTable) home(p driver.Ptr) uint64 {
	return (uint64(p) >> 9 * 0x9E3779B97F4A7C15) >> (t.shift & 63) // & 63: no shift-overflow branch
}

// atHome returns p's entry when it is in p's home slot, else nil. An
// address allocated again after a free finds its entry there unless a
// collision moved it on, so the hit path tries this, small enough to
// inline, before get or put.
func (t *ptrTable) atHome(p driver.Ptr) *ptrSlot {
	if t.n > 0 {
		if s := &t.slots[t.home(p)]; s.p == p {
			return s
		}
	}
	return nil
}

// get returns the live block at p, or nil.
func (t *ptrTable) get(p driver.Ptr) *block {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(p); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.p == p {
			if liveAt(p, s.b) {
				return s.b
			}
			return nil
		}
		if s.p == 0 {
			return nil
		}
	}
}

// put records b, allocated at p, replacing p's entry.
func (t *ptrTable) put(p driver.Ptr, b *block) {
	if len(t.slots) > 0 {
		mask := uint64(len(t.slots) - 1)
		for i := t.home(p); ; i = (i + 1) & mask {
			s := &t.slots[i]
			if s.p == p {
				s.b = b
				return
			}
			if s.p == 0 {
				if 2*(t.n+1) <= len(t.slots) {
					*s = ptrSlot{p, b}
					t.n++
					return
				}
				break
			}
		}
	}
	t.rebuild()
	t.insert(p, b)
}

// insert adds p, which has no entry, to a table with room for it.
func (t *ptrTable) insert(p driver.Ptr, b *block) {
	mask := uint64(len(t.slots) - 1)
	i := t.home(p)
	for t.slots[i].p != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = ptrSlot{p, b}
	t.n++
}

// rebuild drops the stale entries into a table sized so that the live
// ones fill at most a quarter of it: at least a quarter of its slots are
// filled by new addresses before the next rebuild, so the cost per put
// stays constant.
func (t *ptrTable) rebuild() {
	old := t.slots
	n := 0
	for _, s := range old {
		if s.p != 0 && liveAt(s.p, s.b) {
			n++
		}
	}
	size := minPtrTable
	for size < 4*(n+1) {
		size *= 2
	}
	t.slots = make([]ptrSlot, size)
	t.shift = uint(64 - bits.TrailingZeros64(uint64(size)))
	t.n = 0
	for _, s := range old {
		if s.p != 0 && liveAt(s.p, s.b) {
			t.insert(s.p, s.b)
		}
	}
}
