package wrlru

// Shards: the entries of one cache, split by key-object address. The locking
// rule is on the shard type; below, how hits avoid the lock and how the heap
// orders entries.
//
// Lock-free hits. m is the shard's authoritative map. read is an immutable
// copy of it (a map nobody writes once published) that hits consult without
// any lock: a hit writes only its entry's stamp, and that only when the
// stamp is out of date, and its goroutine's hit stripe. read lags m: an
// entry inserted since it was built is found under the read lock (and
// counted in readMisses; once those reach half the map, read is rebuilt, so
// the copy is amortised over the lookups that needed it), and a removed
// entry stays in read with its val set to nil, which hits treat as absent
// (rebuilt once the dead outnumber the live). Setting val to nil also
// releases the value at once.
//
// Recency: heap is a min-heap on entry.hstamp, the stamp an entry had when
// it was last placed in the heap. Stamps grow, so hstamp <= stamp for every
// entry; victimLocked re-places the top while its stamp has moved on, and
// stops at a top whose stamp equals its heap key, which is then the smallest
// stamp of all. (Two hits racing on one entry may store their stamps out of
// order; the entry then looks as old as the earlier of the two concurrent
// uses, either of which may count as the last. victimLocked also accepts a
// top whose stamp went down.) Stamps come from the budget's epoch (see
// Cache.touch): in exact mode every hit advances it, so the victim is the
// least recently used entry; otherwise only inserts do, and entries used
// since the same insert tie.

import (
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"
)

// A shard holds the entries of the key objects whose address hashes to it.
//
// Locking rule: mu guards m, heap, objs, inflight, misses, readDead and
// every plain field of the entries and objRecs of this shard; holders of the
// read lock only read them. The atomic fields (read, readMisses,
// entry.stamp, entry.val) are read without the lock; read and entry.val are
// only stored under the write lock, readMisses and entry.stamp by anyone.
// No other lock is taken while mu is held, except the runtime's own (weak
// pointers, cleanups). Where a caller's key is hashed under mu (map lookups
// and inserts of a key that has not been stored yet), mu is released by
// defer: the hash panics for an interface holding an unhashable value.
// Stored keys hash without panicking and are equal to themselves (see
// selfEqual), so deletes and rebuilds of them need no such care.
//
// Methods whose names end in Locked expect mu held for writing; the
// shard's other users (Cache, Budget's evictor) take mu themselves.
type shard[T any, A comparable, V any] struct {
	read       atomic.Pointer[map[key[A]]*entry[T, A, V]] // immutable; nil = empty
	readMisses atomic.Int64                               // hits that found m ahead of read
	_          [112]byte                                  // read is loaded by every hit, mu written by misses

	mu       sync.RWMutex
	m        map[key[A]]*entry[T, A, V]
	heap     entryHeap[T, A, V]
	objs     map[uintptr]*objRec[T, A, V] // by object address
	inflight map[key[A]]*call[V]
	misses   uint64
	readDead int // entries of read removed since it was built
	mPeak    int // largest len(m) since the maps were last rebuilt

	// Keep the next shard's lock word off this shard's cache lines.
	_ [128]byte
}

type entry[T any, A comparable, V any] struct {
	key    key[A]
	rec    *objRec[T, A, V]
	val    atomic.Pointer[V] // nil once removed
	stamp  atomic.Uint64     // budget epoch at last use
	hstamp uint64            // stamp when last placed in the heap
	hidx   int               // index in the shard's heap
	// The entries of one object form a list headed by its objRec.
	prev, next *entry[T, A, V]
}

// objRec is a cache's record of one key object: the weak pointer that
// identifies it, its cleanup, and its entries (all in one shard).
type objRec[T any, A comparable, V any] struct {
	wp      weak.Pointer[T]
	addr    uintptr
	cleanup runtime.Cleanup
	head    *entry[T, A, V]
	dead    bool // dropped (cleanup, Evict, Clear, address reuse); never reused
}

func newShard[T any, A comparable, V any]() *shard[T, A, V] {
	s := &shard[T, A, V]{}
	s.resetLocked()
	return s
}

// publishLocked rebuilds read from m.
func (s *shard[T, A, V]) publishLocked() {
	if len(s.m) == 0 {
		s.read.Store(nil)
	} else {
		r := maps.Clone(s.m)
		s.read.Store(&r)
	}
	s.readMisses.Store(0)
	s.readDead = 0
}

// settleLocked runs after removals: it rebuilds read once its dead entries
// outnumber the live ones, and shrinks the maps.
func (s *shard[T, A, V]) settleLocked() {
	if s.readDead > 0 {
		if r := s.read.Load(); r == nil || 2*s.readDead >= len(*r) {
			s.publishLocked()
		}
	}
	s.shrinkLocked()
}

// resetLocked empties the shard (newShard calls it before the shard is
// shared, so without mu).
func (s *shard[T, A, V]) resetLocked() {
	s.m = make(map[key[A]]*entry[T, A, V])
	s.heap = nil
	s.mPeak = 0
	s.publishLocked()
	s.objs = make(map[uintptr]*objRec[T, A, V])
	if s.inflight == nil {
		s.inflight = make(map[key[A]]*call[V])
	}
}

// recForLocked returns obj's record in this shard, registering obj's
// cleanup on first use. A record left at obj's address by a collected object
// is dropped first; dropped reports how many entries went with it.
func (s *shard[T, A, V]) recForLocked(c *Cache[T, A, V], obj *T) (rec *objRec[T, A, V], dropped int) {
	addr := uintptr(unsafe.Pointer(obj))
	if rec = s.objs[addr]; rec != nil {
		if rec.wp.Value() == obj {
			return rec, 0
		}
		dropped = s.dropRecLocked(rec)
	}
	rec = &objRec[T, A, V]{wp: weak.Make(obj), addr: addr}
	rec.cleanup = runtime.AddCleanup(obj, objectDied[T, A, V], cleanupArg[T, A, V]{c.self, rec})
	s.objs[addr] = rec
	s.mPeak = max(s.mPeak, len(s.objs))
	return rec, dropped
}

// dropRecLocked removes rec and all its entries; it returns how many
// entries went.
func (s *shard[T, A, V]) dropRecLocked(rec *objRec[T, A, V]) int {
	if rec.dead {
		return 0
	}
	rec.dead = true
	if s.objs[rec.addr] == rec {
		delete(s.objs, rec.addr)
	}
	n := 0
	for rec.head != nil {
		s.removeLocked(rec.head)
		n++
	}
	return n
}

// insertLocked adds a new entry; the caller reserved its slot in the budget.
func (s *shard[T, A, V]) insertLocked(c *Cache[T, A, V], k key[A], rec *objRec[T, A, V], v V) {
	st := c.budget.epoch.Add(1)
	e := &entry[T, A, V]{key: k, rec: rec, hstamp: st, hidx: len(s.heap)}
	e.val.Store(&v)
	e.stamp.Store(st)
	e.next = rec.head
	if rec.head != nil {
		rec.head.prev = e
	}
	rec.head = e
	s.m[k] = e
	s.mPeak = max(s.mPeak, len(s.m))
	s.heap = append(s.heap, e)
	s.heap.up(e.hidx)
	c.resident.Add(1)
}

// removeLocked unlinks e from the map, the heap and its object's list. The
// caller gives the slot back (Cache.release) after unlocking.
func (s *shard[T, A, V]) removeLocked(e *entry[T, A, V]) {
	if s.m[e.key] == e {
		delete(s.m, e.key)
	}
	e.val.Store(nil) // hits through read see it gone; the value is free
	s.readDead++
	// heap
	i, last := e.hidx, len(s.heap)-1
	if i != last {
		s.heap.swap(i, last)
	}
	s.heap[last] = nil
	s.heap = s.heap[:last]
	if i != last {
		s.heap.down(i)
		s.heap.up(i)
	}
	// object list
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		e.rec.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	}
	e.prev, e.next = nil, nil
}

// shrinkMin is the map size below which shrinkLocked never rebuilds: small
// maps cost little, and rebuilding them on every drop would.
const shrinkMin = 256

// shrinkLocked rebuilds the maps and the heap once they hold under a
// quarter of their peak: Go maps never give memory back on delete, and a
// burst of short-lived key objects must not leave the cache holding its peak
// size. Amortised O(1) per removal.
func (s *shard[T, A, V]) shrinkLocked() {
	if s.mPeak < shrinkMin || max(len(s.m), len(s.objs)) >= s.mPeak/4 {
		return
	}
	m := make(map[key[A]]*entry[T, A, V], len(s.m))
	maps.Copy(m, s.m)
	s.m = m
	objs := make(map[uintptr]*objRec[T, A, V], len(s.objs))
	maps.Copy(objs, s.objs)
	s.objs = objs
	s.heap = slices.Clip(slices.Clone(s.heap))
	s.mPeak = max(len(s.m), len(s.objs))
}

// victimLocked returns the least recently used entry, or nil when empty.
func (s *shard[T, A, V]) victimLocked() *entry[T, A, V] {
	if len(s.heap) == 0 {
		return nil
	}
	for {
		top := s.heap[0]
		st := top.stamp.Load()
		if st == top.hstamp {
			return top
		}
		top.hstamp = st
		s.heap.down(0)
	}
}

// entryHeap is a min-heap of entries on hstamp, each entry knowing its
// index (hidx). It is plain data with no lock of its own: a shard's heap is
// guarded by the shard's mu, like the rest of the shard.
type entryHeap[T any, A comparable, V any] []*entry[T, A, V]

func (h entryHeap[T, A, V]) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx = i
	h[j].hidx = j
}

func (h entryHeap[T, A, V]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].hstamp <= h[i].hstamp {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h entryHeap[T, A, V]) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].hstamp < h[l].hstamp {
			m = r
		}
		if h[i].hstamp <= h[m].hstamp {
			return
		}
		h.swap(i, m)
		i = m
	}
}
