package devalloc

import (
	"math/bits"

	"github.com/accelkit/accelkit/driver"
)

// ptrTable maps the address of every live block to the block: the lookup
// of Free and RecordStream. It is an open-addressing hash table with
// linear probing and backward-shift deletion (no tombstones, so a table
// under constant alloc/free churn never degrades or rehashes), kept at
// most half full. Against Go's map it costs a third: one multiply for the
// hash, and a hit is almost always the first slot. Not safe for
// concurrent use: Allocator.mu guards it. Address 0 marks an empty slot;
// the allocator never stores it (Alloc(0) returns 0 without a block).
type ptrTable struct {
	slots []ptrSlot
	n     int
	shift uint // 64 - log2(len(slots))
}

type ptrSlot struct {
	p driver.Ptr
	b *block
}

const minPtrTable = 64

// home is the slot p hashes to: Fibonacci hashing of the address above
// kMinBlockSize, whose low bits are always zero.
func (t *ptrTable) home(p driver.Ptr) uint64 {
	return (uint64(p) >> 9 * 0x9E3779B97F4A7C15) >> t.shift
}

func (t *ptrTable) get(p driver.Ptr) *block {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(p); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.p == p {
			return s.b
		}
		if s.p == 0 {
			return nil
		}
	}
}

// put maps p to b, replacing any block p had.
func (t *ptrTable) put(p driver.Ptr, b *block) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(p); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.p == p {
			s.b = b
			return
		}
		if s.p == 0 {
			*s = ptrSlot{p, b}
			t.n++
			return
		}
	}
}

// del removes p and returns its block, or nil if p was not there.
func (t *ptrTable) del(p driver.Ptr) *block {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	i := t.home(p)
	for t.slots[i].p != p {
		if t.slots[i].p == 0 {
			return nil
		}
		i = (i + 1) & mask
	}
	b := t.slots[i].b
	// Backward shift: move later entries of the probe run into the hole
	// unless that would put one before its home slot.
	for j := (i + 1) & mask; t.slots[j].p != 0; j = (j + 1) & mask {
		h := t.home(t.slots[j].p)
		// Entry j may fill hole i if its home is not in (i, j] cyclically.
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = ptrSlot{}
	t.n--
	return b
}

func (t *ptrTable) grow() {
	old := t.slots
	size := max(minPtrTable, 2*len(old))
	t.slots = make([]ptrSlot, size)
	t.shift = uint(64 - bits.TrailingZeros64(uint64(size)))
	t.n = 0
	for _, s := range old {
		if s.p != 0 {
			t.put(s.p, s.b)
		}
	}
}

// all calls fn for every entry, in no particular order.
func (t *ptrTable) all(fn func(p driver.Ptr, b *block)) {
	for _, s := range t.slots {
		if s.p != 0 {
			fn(s.p, s.b)
		}
	}
}
