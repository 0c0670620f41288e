package wrlru

import (
	"runtime"
	"sync"
	"sync/atomic"
	"weak"
)

// Budget is a capacity in entries shared by several caches (XLA's LRUList
// idea): caches built with Options{Budget: b} together never hold more than
// b's maximum entries, and when it is full an insert into any of them evicts
// an old entry from any of them.
//
// Recency across caches (and across the shards of one cache) is approximate:
// every insert advances the budget's epoch, and every use stores the current
// epoch in the entry (when it is not there already), so stamps compare
// across shards and caches at the granularity of one insert: entries used
// since the same insert tie. An insert that needs a slot looks at three
// candidate shards (its own, another of its cache in rotation, and one of
// another member cache in rotation), takes each one's oldest entry, and
// evicts the candidate with the oldest stamp. This is sampled LRU, as in
// Redis: the victim is old, not always the oldest. A cache with one shard
// and no shared budget stamps every hit with a new epoch and has only its
// own shard to choose from, so it evicts in exact LRU order.
//
// A Budget is safe for concurrent use. A member cache that is collected
// leaves the budget and gives its slots back.
type Budget struct {
	// Locking rule: used and epoch are atomics; mu guards members only and is
	// never held together with a shard lock.

	max   int64
	used  atomic.Int64 // resident entries plus slots reserved by inserts
	_     [56]byte     // used is written by inserts, epoch read by every hit
	epoch atomic.Uint64
	_     [56]byte
	rot   atomic.Uint64
	// shared is set once a cache joins through Options.Budget; private budgets
	// never look at members.
	shared atomic.Bool

	mu      sync.Mutex
	members []member
}

// NewBudget returns a budget with the bound opts gives. A value out of
// range is an error wrapping ErrInvalidOption that names the field.
func NewBudget(opts BudgetOptions) (*Budget, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return newBudget(opts.bound()), nil
}

func newBudget(max int64) *Budget { return &Budget{max: max} }

// MaxSize returns the budget's bound; 0 means unbounded.
func (b *Budget) MaxSize() int { return int(b.max) }

// Len returns the entries resident in all member caches, plus slots
// reserved by inserts in progress.
func (b *Budget) Len() int { return int(b.used.Load()) }

// evictor is what the budget needs of a member cache, whatever its types.
type evictor interface {
	numShards() int
	// peek reports the stamp of shard i's oldest entry.
	peek(i int) (epoch uint64, ok bool)
	// evict removes shard i's least recently used entry and gives its slot
	// back; false when the shard is empty.
	evict(i int) bool
}

// member refers to a cache weakly, so a budget does not keep caches alive.
type member interface {
	get() evictor // nil once the cache is collected
}

type weakMember[T any, A comparable, V any] struct {
	wp weak.Pointer[Cache[T, A, V]]
}

func (m weakMember[T, A, V]) get() evictor {
	if c := m.wp.Value(); c != nil {
		return c
	}
	return nil
}

func (b *Budget) join(m member) {
	b.mu.Lock()
	b.members = append(b.members, m)
	b.mu.Unlock()
	b.shared.Store(true)
}

// live returns the member caches still alive, pruning the collected ones.
func (b *Budget) live() []evictor {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]evictor, 0, len(b.members))
	keep := b.members[:0]
	for _, m := range b.members {
		if ev := m.get(); ev != nil {
			out = append(out, ev)
			keep = append(keep, m)
		}
	}
	clear(b.members[len(keep):])
	b.members = keep
	return out
}

// releaseArg is held by the cleanup of a cache that shares a budget.
type releaseArg struct {
	b        *Budget
	resident *atomic.Int64
}

// releaseResident gives a collected cache's slots back to its budget.
func releaseResident(a releaseArg) {
	a.b.used.Add(-a.resident.Swap(0))
}

// reserve takes one slot for an insert into c's shard own, evicting when the
// budget is full. It holds no lock on return.
func (b *Budget) reserve(c evictor, own int) {
	if b.max == 0 {
		b.used.Add(1)
		return
	}
	for {
		n := b.used.Load()
		if n < b.max {
			if b.used.CompareAndSwap(n, n+1) {
				return
			}
			continue
		}
		if !b.evictOne(c, own) {
			// Every slot is reserved by an insert about to land; let it.
			runtime.Gosched()
		}
	}
}

type candidate struct {
	ev evictor
	i  int
}

// evictOne evicts one entry for an insert into c's shard own: the oldest
// (by epoch) of the candidates' least recently used entries, else any
// entry. False when nothing could be evicted.
func (b *Budget) evictOne(c evictor, own int) bool {
	var buf [3]candidate
	cands := append(buf[:0], candidate{c, own})
	if n := c.numShards(); n > 1 {
		i := int(b.rot.Add(1) % uint64(n))
		if i == own {
			i = (i + 1) % n
		}
		cands = append(cands, candidate{c, i})
	}
	var others []evictor
	if b.shared.Load() {
		others = b.live()
		if len(others) > 1 {
			r := b.rot.Add(1)
			ev := others[r%uint64(len(others))]
			if ev == c {
				ev = others[(r+1)%uint64(len(others))]
			}
			cands = append(cands, candidate{ev, int((r / uint64(len(others))) % uint64(ev.numShards()))})
		}
	}
	best, bestEpoch := -1, uint64(0)
	for j, cd := range cands {
		if ep, ok := cd.ev.peek(cd.i); ok && (best < 0 || ep < bestEpoch) {
			best, bestEpoch = j, ep
		}
	}
	if best >= 0 && cands[best].ev.evict(cands[best].i) {
		return true
	}
	// The sampled shards were empty: take from anywhere.
	if others == nil {
		others = []evictor{c}
	}
	for _, ev := range others {
		for i := range ev.numShards() {
			if ev.evict(i) {
				return true
			}
		}
	}
	return false
}

func (c *Cache[T, A, V]) numShards() int { return len(c.shards) }

func (c *Cache[T, A, V]) peek(i int) (uint64, bool) {
	s := c.shards[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.victimLocked(); e != nil {
		return e.stamp.Load(), true
	}
	return 0, false
}

func (c *Cache[T, A, V]) evict(i int) bool {
	s := c.shards[i]
	s.mu.Lock()
	e := s.victimLocked()
	if e != nil {
		s.removeLocked(e)
		s.settleLocked()
	}
	s.mu.Unlock()
	if e == nil {
		return false
	}
	c.release(1)
	return true
}
