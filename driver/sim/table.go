package sim

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/accelkit/accelkit/driver"
)

type regionKind uint8

const (
	kindAlloc      regionKind = iota // Malloc: the whole region is usable
	kindHost                         // HostAlloc: the whole region is pinned host memory
	kindReserve                      // VMM AddressReserve: usable where mapped with access
	kindRegistered                   // HostRegister: the caller's memory, pinned in place
)

// region is one live mapping: a Malloc allocation, a HostAlloc buffer, a
// HostRegister registration or a VMM reservation. Its fields are guarded
// by the owning table's mu, but for kind, base, size and buf, fixed before
// it is inserted, and pin, which only the one who took the region out of
// the table (HostUnregister or Close) uses again.
type region struct {
	base, size uint64
	mapped     uint64 // bytes the OS mapped (size rounded to the page)
	kind       regionKind
	users      int      // copies running on the memory right now
	dead       bool     // removed from the table; unmapped once users is 0
	granules   granules // kindReserve: the mapped granules
	gran       uint64
	buf        *driver.HostBuffer // kindHost, kindRegistered: the buffer handed out
	pin        runtime.Pinner     // kindRegistered: keeps the caller's Go memory in place

	left, right *region // the table's treap: children by base
	prio        uint64  // treap priority (a heap on it): priority(base)
}

func (r *region) end() uint64 { return r.base + r.size }

// table maps address ranges to live regions so that every copy can be
// checked against them. The regions form a treap ordered by base: a binary
// search tree whose shape a pseudo-random priority per region (a hash of
// its base) keeps balanced in expectation, whatever order the OS hands out
// addresses in. Insert, remove and every lookup cost O(log n) in the live
// regions, so a program holding 100,000 reservations pays per call about
// what one holding 1,000 pays (a sorted slice moved n/2 pointers per
// insert and scanned all of them per remove). The nodes are the regions
// themselves: no allocation beyond the region.
//
// Locking: mu guards root, closed and every field of the regions in it;
// idle is signalled (with mu held) when a region's users drops to 0. mu is
// a leaf lock: nothing else is locked while holding it. Malloc and Free map
// and unmap outside it; the VMM calls change mappings under it, so that a
// range never changes between the check and the syscall.
type table struct {
	mu     sync.Mutex
	idle   *sync.Cond
	root   *region
	n      int  // regions in the tree
	closed bool // drained by Close: insert refuses
}

func newTable() *table {
	t := &table{}
	t.idle = sync.NewCond(&t.mu)
	return t
}

// priority is r's heap priority in the treap: splitmix64 of its base, so
// that consecutive addresses (mmap hands them out top-down) still give a
// tree of expected depth O(log n).
func priority(base uint64) uint64 {
	z := base + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// floorLocked returns the region with the greatest base <= p, or nil.
// Caller holds mu.
func (t *table) floorLocked(p uint64) *region {
	var best *region
	for x := t.root; x != nil; {
		if x.base <= p {
			best, x = x, x.right
		} else {
			x = x.left
		}
	}
	return best
}

// findLocked returns the region containing address p, or nil. Caller holds
// mu.
func (t *table) findLocked(p uint64) *region {
	if r := t.floorLocked(p); r != nil && p < r.end() {
		return r
	}
	return nil
}

// overlapLocked returns a region that overlaps [p, p+n), or nil. Caller
// holds mu; n > 0. The regions are disjoint, so their ends are ordered as
// their bases: only the last one starting below p+n can reach p.
func (t *table) overlapLocked(p, n uint64) *region {
	if r := t.floorLocked(p + n - 1); r != nil && r.end() > p {
		return r
	}
	return nil
}

// insertLocked adds r and reports whether it could: after drain (Close) it
// cannot, and the caller unmaps r. Caller holds mu; r must not overlap a
// live region (the OS never hands out overlapping mappings).
func (t *table) insertLocked(r *region) bool {
	if t.closed {
		return false
	}
	r.prio = priority(r.base)
	lo, hi := split(t.root, r.base)
	r.left, r.right = nil, nil
	t.root = merge(merge(lo, r), hi)
	t.n++
	return true
}

// split cuts the treap x into the regions with base < key and the rest.
func split(x *region, key uint64) (lo, hi *region) {
	if x == nil {
		return nil, nil
	}
	if x.base < key {
		x.right, hi = split(x.right, key)
		return x, hi
	}
	lo, x.left = split(x.left, key)
	return lo, x
}

// merge joins treaps a and b, every base in a below every base in b.
func merge(a, b *region) *region {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio >= b.prio:
		a.right = merge(a.right, b)
		return a
	}
	b.left = merge(a, b.left)
	return b
}

// unlinkLocked takes r out of the tree and reports whether it was there.
// Caller holds mu.
func (t *table) unlinkLocked(r *region) bool {
	link := &t.root
	for x := *link; x != nil; x = *link {
		switch {
		case r.base < x.base:
			link = &x.left
		case r.base > x.base:
			link = &x.right
		case x != r: // another region at that base: r is not in this table
			return false
		default:
			*link = merge(r.left, r.right)
			r.left, r.right = nil, nil
			t.n--
			return true
		}
	}
	return false
}

// removeLocked takes r out of the table and marks it dead, then waits until
// no copy is running on it, so the caller may unmap it. Caller holds mu,
// which the wait releases meanwhile.
func (t *table) removeLocked(r *region) {
	if !t.unlinkLocked(r) {
		return
	}
	r.dead = true
	t.waitIdleLocked(r)
}

// waitIdleLocked waits until no copy runs on r. Caller holds mu.
func (t *table) waitIdleLocked(r *region) {
	for r.users > 0 {
		t.idle.Wait()
	}
}

// rangeErrLocked describes why [p, p+n) is not usable memory in t. Caller
// holds mu.
func (t *table) rangeErrLocked(what string, p, n uint64) error {
	r := t.findLocked(p)
	switch {
	case r == nil:
		return fmt.Errorf("%s range [%#x, %#x) does not start in a live allocation: %w", what, p, p+n, driver.ErrInvalidPointer)
	case n > r.end()-p:
		return fmt.Errorf("%s range [%#x, %#x) runs past the end of its allocation [%#x, %#x): %w",
			what, p, p+n, r.base, r.end(), driver.ErrInvalidValue)
	case r.kind == kindReserve:
		return fmt.Errorf("%s range [%#x, %#x) is not wholly mapped with access granted in reservation [%#x, %#x): %w",
			what, p, p+n, r.base, r.end(), driver.ErrInvalidValue)
	}
	return nil
}

// usableLocked reports whether [p, p+n) lies inside one live region and,
// for a reservation, every granule it touches is mapped with access. Caller
// holds mu; n > 0.
func (t *table) usableLocked(p, n uint64) (*region, bool) {
	r := t.findLocked(p)
	if r == nil || n > r.end()-p {
		return nil, false
	}
	if r.kind == kindReserve {
		first, last := (p-r.base)/r.gran, (p+n-1-r.base)/r.gran
		if !r.granules.accessible(int(first), int(last)+1) {
			return nil, false
		}
	}
	return r, true
}

// check validates [p, p+n) without holding it.
func (t *table) check(what string, p, n uint64) error {
	if n == 0 {
		return nil
	}
	if p+n < p {
		return fmt.Errorf("%s range at %#x of %d bytes overflows the address space: %w", what, p, n, driver.ErrInvalidValue)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.usableLocked(p, n); ok {
		return nil
	}
	return t.rangeErrLocked(what, p, n)
}

// acquire validates [p, p+n) and keeps its region mapped until release.
// A nil region with nil error means n == 0.
func (t *table) acquire(what string, p, n uint64) (*region, error) {
	if n == 0 {
		return nil, nil
	}
	if p+n < p {
		return nil, fmt.Errorf("%s range at %#x of %d bytes overflows the address space: %w", what, p, n, driver.ErrInvalidValue)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.usableLocked(p, n)
	if !ok {
		return nil, t.rangeErrLocked(what, p, n)
	}
	r.users++
	return r, nil
}

// release ends an acquire.
func (t *table) release(r *region) {
	if r == nil {
		return
	}
	t.mu.Lock()
	r.users--
	if r.users == 0 {
		t.idle.Broadcast()
	}
	t.mu.Unlock()
}

// drain empties and closes the table and returns what was in it, once no
// copy runs on it (Close).
func (t *table) drain() []*region {
	t.mu.Lock()
	defer t.mu.Unlock()
	regs := make([]*region, 0, t.n)
	regs = appendInOrder(regs, t.root)
	t.root, t.n, t.closed = nil, 0, true
	for _, r := range regs {
		r.dead = true
		t.waitIdleLocked(r)
	}
	return regs
}

// appendInOrder appends the regions of the treap x to regs by base,
// unlinking each from the tree as it goes.
func appendInOrder(regs []*region, x *region) []*region {
	for x != nil {
		regs = appendInOrder(regs, x.left)
		regs = append(regs, x)
		next := x.right
		x.left, x.right = nil, nil
		x = next
	}
	return regs
}
