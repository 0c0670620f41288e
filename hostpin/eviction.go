package hostpin

// Eviction: which idle memory goes back to the driver, and when.
//
// An evictable unit is an idle standalone block or a wholly idle slab; the
// units sit on an age list, oldest at the front. Idle bytes above
// Options.CacheCap (2 GiB) are returned oldest first (trimLocked, after
// every put); EmptyCache, Close and an out-of-memory retry return them all
// (releaseIdle). Idle pieces of a slab still in use cannot be returned alone
// and stay cached.

// ageNode links an evictable unit (an idle standalone block or a wholly
// idle slab) into the allocator's age list, oldest at the front.
type ageNode struct {
	prev, next *ageNode
	blk        *block
	slab       *slab
	linked     bool
}

func (a *Allocator) pushAgeLocked(n *ageNode) {
	n.prev, n.next = a.age.prev, &a.age
	a.age.prev.next = n
	a.age.prev = n
	n.linked = true
}

func (a *Allocator) unlinkAgeLocked(n *ageNode) {
	if !n.linked {
		return
	}
	n.prev.next = n.next
	n.next.prev = n.prev
	n.prev, n.next, n.linked = nil, nil, false
}

// evictOldestLocked removes the oldest evictable unit from the cache and
// returns its buffer, or nil when none is left.
func (a *Allocator) evictOldestLocked() unit {
	n := a.age.next
	if n == &a.age {
		return nil
	}
	a.unlinkAgeLocked(n)
	if sl := n.slab; sl != nil {
		for _, p := range sl.pieces {
			a.buckets[p.bucket].remove(p)
			a.stats.BytesCached -= int64(len(p.mem))
		}
		return sl.hb
	}
	b := n.blk
	a.buckets[b.bucket].remove(b)
	a.stats.BytesCached -= int64(len(b.mem))
	return b.hb
}

// evictAllLocked removes every evictable unit and returns their buffers.
func (a *Allocator) evictAllLocked() []unit {
	var all []unit
	for u := a.evictOldestLocked(); u != nil; u = a.evictOldestLocked() {
		all = append(all, u)
	}
	return all
}

// trimLocked evicts oldest units until the cached bytes fit the cap.
func (a *Allocator) trimLocked() []unit {
	var victims []unit
	for a.stats.BytesCached > a.opts.CacheCap {
		u := a.evictOldestLocked()
		if u == nil {
			break
		}
		a.stats.Evictions++
		victims = append(victims, u)
	}
	return victims
}

// releaseIdle polls for completed frees and returns every idle unit to the
// driver: the work of EmptyCache, Close and the out-of-memory retry. It
// reports how many units went.
func (a *Allocator) releaseIdle() (int, error) {
	a.poll()
	a.mu.Lock()
	units := a.evictAllLocked()
	a.mu.Unlock()
	return len(units), a.freeUnits(units)
}
