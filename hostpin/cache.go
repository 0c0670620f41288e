package hostpin

// The Allocator's idle cache: one free list per size class (a bucket), the
// hit path that takes a cached block (takeLocked) and the way back in for a
// block nobody uses any more (putLocked). Which idle units leave the cache,
// and when, is eviction.go.

// blockList is a bucket's free list of idle blocks, oldest at the head.
type blockList struct{ head, tail *block }

func (l *blockList) push(b *block) {
	b.prev, b.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = b
	} else {
		l.head = b
	}
	l.tail = b
}

func (l *blockList) remove(b *block) {
	if b.prev != nil {
		b.prev.next = b.next
	} else {
		l.head = b.next
	}
	if b.next != nil {
		b.next.prev = b.prev
	} else {
		l.tail = b.prev
	}
	b.prev, b.next = nil, nil
}

// takeLocked removes and returns an idle block of want..limit bytes, or nil.
// The exact bucket is tried first, then the next ones up to limit; within a
// bucket the most recently freed block (warmest in the CPU caches) wins.
func (a *Allocator) takeLocked(want, limit int) *block {
	first := bucketIndex(want, a.perDbl)
	last := min(bucketIndex(limit, a.perDbl), len(a.buckets)-1)
	for i := first; i <= last; i++ {
		for b := a.buckets[i].tail; b != nil; b = b.prev {
			if n := len(b.mem); n < want || n > limit {
				continue
			}
			a.buckets[i].remove(b)
			a.stats.BytesCached -= int64(len(b.mem))
			if b.slab != nil {
				if b.slab.busy == 0 {
					a.unlinkAgeLocked(&b.slab.age)
				}
				b.slab.busy++
			} else {
				a.unlinkAgeLocked(&b.age)
			}
			a.useLocked(b)
			return b
		}
	}
	return nil
}

// putLocked makes a block nobody uses any more idle in the cache (the
// Allocator's core.idleLocked) and returns the units that go to the driver
// now: every idle unit after Close, otherwise those the cap evicts.
func (a *Allocator) putLocked(b *block) []unit {
	b.state = stateIdle
	a.buckets[b.bucket].push(b)
	a.stats.BytesCached += int64(len(b.mem))
	if sl := b.slab; sl != nil {
		sl.busy--
		if sl.busy == 0 {
			a.pushAgeLocked(&sl.age)
		}
	} else {
		a.pushAgeLocked(&b.age)
	}
	if a.closed {
		return a.evictAllLocked()
	}
	return a.trimLocked()
}
