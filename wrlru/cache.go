package wrlru

// Design note.
//
// A Cache is split into shards by the address of the key object, so every
// entry of one object lives in one shard and dropping an object's entries
// (its cleanup, Evict) locks that shard alone.
//
//   - A hit takes no lock and writes no memory that other cores use. It
//     looks the key up in the shard's read view, an immutable copy of the
//     shard's map published through an atomic pointer; checks through the
//     entry's weak pointer that the entry belongs to this very object (an
//     address can be reused once its object is collected and before its
//     cleanup has run); stores the budget's epoch in the entry only if the
//     epoch moved; and counts itself in a per-goroutine stripe. An entry
//     newer than the read view is found under the shard's read lock instead,
//     and enough of those rebuild the view (see shard).
//   - Misses, inserts, evictions, cleanups, Clear and Evict take the shard's
//     write lock, one shard at a time. A computation never runs under any
//     lock, so a cleanup or an Evict never waits for one.
//   - A computation is registered in its shard's inflight map while it runs.
//     Evict and Clear take it out and mark it dropped, and finish inserts
//     only a call that was not dropped: the in-flight map is the generation,
//     and hits, which never look at it, pay nothing for it.
//   - Hashing a caller's arguments can panic (an interface holding a slice).
//     Every section that hashes them under a lock unlocks by defer, and
//     nothing is changed before the hash, so the panic reaches the caller and
//     leaves the shard as it was.
//
// Recency. Each entry carries a stamp: the budget's epoch at its last use;
// the epoch advances on every insert (and, in exact mode, on every hit).
// The shard keeps its entries in a min-heap ordered by the stamp each had
// when it was last placed; a hit only raises the atomic stamp, and eviction
// re-sifts the heap top until the top's stamp is current, at which point no
// entry has an older stamp. In exact mode (one shard, private budget) every
// use has its own stamp, so eviction is exact LRU. Otherwise entries used
// since the same insert tie, and across shards and caches the victim is
// sampled: see Budget.
//
// Bound. A Budget (private to the cache unless Options.Budget shares one)
// keeps one atomic count of resident entries plus slots reserved by inserts
// in progress. An insert reserves a slot (compare-and-swap below the
// maximum, evicting first when full) before it takes the shard lock, so the
// number of resident entries never exceeds the maximum at any instant.

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"
	"weak"
)

// Errors returned by the package. Compare with errors.Is.
var (
	// ErrNilObject is returned by Get and Evict when the key object is nil.
	ErrNilObject = errors.New("wrlru: nil key object: pass a non-nil *T")
	// ErrRecursive is returned when a computation asks, directly or through
	// other cached calls made with the context it was given, for the key it is
	// computing. Without it the call would wait for itself forever.
	ErrRecursive = errors.New("wrlru: recursive call: the computation asked for its own key")
	// ErrPanicked is returned to the callers waiting on a computation whose
	// function panicked; the panic itself continues in the computing goroutine.
	ErrPanicked = errors.New("wrlru: the cached function panicked")
	// ErrInvalidOption is wrapped by New and NewBudget for a bad option value.
	ErrInvalidOption = errors.New("wrlru: invalid option")
)

const (
	// DefaultMaxSize is the bound used when Options sets neither MaxSize nor
	// Budget; it is JAX's default for weakref_lru_cache.
	DefaultMaxSize = 2048

	// MaxShards is the largest shard count. More shards than a few per
	// processor only spread the bound thinner without adding parallelism.
	MaxShards = 64

	// minEntriesPerShard keeps the default shard count low for small caches:
	// each shard is an exact LRU of its share of the bound, and a shard of a
	// handful of entries would make recency too coarse. Caches bounded by
	// fewer than 2*minEntriesPerShard entries get one shard (exact LRU).
	minEntriesPerShard = 64

	// shardsPerProc is the default shard count per GOMAXPROCS: enough that two
	// goroutines rarely share a shard's lock word.
	shardsPerProc = 4
)

// Cache memoises fn(ctx, obj, args) keyed by a weak reference to obj and by
// args. It holds obj only weakly: when obj becomes unreachable, its entries
// are dropped by a cleanup. Values must not reference their key object: a
// value that does keeps the object, and so the entry, alive for as long as
// the entry stays in the cache.
//
// A Cache is safe for concurrent use by multiple goroutines.
type Cache[T any, A comparable, V any] struct {
	// Locking: each shard's RWMutex guards that shard's entry map, heap,
	// in-flight calls, object records and miss counter; hits take no lock (they
	// read the shard's immutable read view and update atomics only), lookups of
	// entries newer than the view hold it for reading, everything else holds it
	// for writing. At most one shard lock is held at a time, and never while fn
	// runs. A section that hashes a caller's key under a shard lock releases
	// the lock by defer, since hashing may panic. The hit stripes and the
	// Budget's counters are atomics; the Budget's member list has its own mutex,
	// never held with a shard lock.

	fn     func(context.Context, *T, A) (V, error)
	shards []*shard[T, A, V]
	shift  uint // 64 - log2(len(shards)); shard index = hash(addr) >> shift
	budget *Budget
	self   weak.Pointer[Cache[T, A, V]] // handed to cleanups instead of c
	// exact: one shard and a private budget, so every hit advances the
	// epoch and eviction is exact LRU (see touch).
	exact bool
	hits  [hitStripes]stripe
	// resident counts this cache's entries. It is a separate allocation so a
	// shared Budget can give the slots back after the cache is collected.
	resident *atomic.Int64
}

// key identifies an entry inside a shard. addr is the key object's address,
// not a pointer, so the key does not keep the object alive; the entry's
// objRec holds the weak pointer that tells whether the address still denotes
// the same object.
type key[A comparable] struct {
	addr uintptr
	args A
}

// New returns a cache of fn configured by opts (the zero Options is the
// default). A value out of range is an error wrapping ErrInvalidOption.
func New[T any, A comparable, V any](fn func(ctx context.Context, obj *T, args A) (V, error), opts Options) (*Cache[T, A, V], error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: fn is nil: pass the function to cache", ErrInvalidOption)
	}
	var zeroT T
	if unsafe.Sizeof(zeroT) == 0 {
		return nil, fmt.Errorf("%w: key type %T has size zero: zero-size objects share addresses, use a type of at least one byte", ErrInvalidOption, &zeroT)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	b := opts.Budget
	if b == nil {
		b = newBudget(opts.bound())
	}
	n := opts.Shards
	if n == 0 {
		n = defaultShards(b.max)
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	c := &Cache[T, A, V]{
		fn:       fn,
		shards:   make([]*shard[T, A, V], n),
		shift:    uint(64 - bits.TrailingZeros(uint(n))),
		budget:   b,
		resident: new(atomic.Int64),
	}
	for i := range c.shards {
		c.shards[i] = newShard[T, A, V]()
	}
	c.exact = n == 1 && opts.Budget == nil
	c.self = weak.Make(c)
	if opts.Budget != nil {
		b.join(weakMember[T, A, V]{c.self})
		runtime.AddCleanup(c, releaseResident, releaseArg{b, c.resident})
	}
	return c, nil
}

// defaultShards picks shardsPerProc shards per GOMAXPROCS, fewer when the
// bound is small (see minEntriesPerShard).
func defaultShards(bound int64) int {
	n := shardsPerProc * runtime.GOMAXPROCS(0)
	if bound > 0 {
		n = min(n, int(bound/minEntriesPerShard))
	}
	return max(1, min(n, MaxShards))
}

func (c *Cache[T, A, V]) shardIndex(addr uintptr) int {
	if c.shift == 64 {
		return 0
	}
	// Fibonacci hashing: the high bits of addr*phi spread neighbouring
	// addresses (allocations of one size class) across shards.
	return int((uint64(addr) * 0x9E3779B97F4A7C15) >> c.shift)
}

func (c *Cache[T, A, V]) shardFor(addr uintptr) *shard[T, A, V] {
	return c.shards[c.shardIndex(addr)]
}

// Get returns fn(ctx, obj, args), computed once per key while the entry
// stays cached. Concurrent callers of a missing key wait for one
// computation; a waiter whose ctx ends returns ctx.Err() and leaves the
// computation running for the others. An error from fn is returned to the
// caller and to every waiter and is not cached. If the computing caller's
// ctx ended and fn failed, waiters whose own ctx is live compute again.
// A computation that Evict or Clear dropped while it ran returns its value
// to its caller and waiters without inserting it.
//
// fn receives a context derived from ctx that records the keys being
// computed on this call path; a nested Get with it (on this cache or another)
// for one of those keys returns ErrRecursive.
//
// Like a map index, Get panics if args holds an unhashable value in an
// interface (a slice, map or func); the cache is left as it was, and the
// call counts as neither hit nor miss. Arguments not equal to themselves (a
// NaN) can never be found again: fn runs on every such call (each a miss),
// nothing is cached or shared, and ErrRecursive cannot detect fn asking for
// such a key.
//
// If fn panics, the panic continues in the computing caller's goroutine;
// the callers waiting for that computation get ErrPanicked, nothing is
// cached, and the next Get of the key computes afresh.
func (c *Cache[T, A, V]) Get(ctx context.Context, obj *T, args A) (V, error) {
	if obj == nil {
		var zero V
		return zero, ErrNilObject
	}
	k := key[A]{uintptr(unsafe.Pointer(obj)), args}
	s := c.shardFor(k.addr)
	// Lock-free hit through the shard's read view.
	if r := s.read.Load(); r != nil {
		if e := (*r)[k]; e != nil {
			if v := e.val.Load(); v != nil && e.rec.wp.Value() == obj {
				c.touch(e)
				return *v, nil
			}
		}
	}
	// An entry newer than the read view is a hit under the read lock.
	if v, rebuildAt := c.lookupNewer(s, k, obj); v != nil {
		if s.readMisses.Add(1) > rebuildAt {
			s.mu.Lock()
			if s.readMisses.Load() > int64(len(s.m)/2) {
				s.publishLocked()
			}
			s.mu.Unlock()
		}
		return *v, nil
	}
	r, err := c.miss(ctx, s, k, obj)
	runtime.KeepAlive(obj)
	return r, err
}

// lookupNewer looks k up in s's map under the read lock, for an entry newer
// than the read view; rebuildAt is the readMisses count that calls for a
// new view. The lock is released by defer, as everywhere a key is hashed
// under a lock: hashing args panics when an interface in it holds an
// unhashable value (a slice, a map, a func), and that panic must reach the
// caller with the shard unlocked. Without a read view (an empty shard) this
// is the first place k is hashed.
func (c *Cache[T, A, V]) lookupNewer(s *shard[T, A, V], k key[A], obj *T) (v *V, rebuildAt int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.m[k]; e != nil && e.rec.wp.Value() == obj {
		v = e.val.Load()
		c.touch(e)
	}
	return v, int64(len(s.m) / 2)
}

// touch records a use of e and counts the hit. In exact mode every use
// takes a new epoch, one shared atomic add per hit, so the heap orders
// entries exactly. Otherwise the entry takes the current epoch, written only
// when it moved (on inserts): hot entries are read, not written, and hits
// on different cores do not fight over cache lines.
func (c *Cache[T, A, V]) touch(e *entry[T, A, V]) {
	if c.exact {
		e.stamp.Store(c.budget.epoch.Add(1))
	} else if ep := c.budget.epoch.Load(); e.stamp.Load() != ep {
		e.stamp.Store(ep)
	}
	c.hits[stripeIndex()].n.Add(1)
}

// hitStripes is the number of hit counters. Hits are counted in the stripe
// of the calling goroutine (see stripeIndex), so goroutines on different
// cores rarely write one cache line; Info sums the stripes.
const hitStripes = 32

type stripe struct {
	n atomic.Uint64
	_ [56]byte // one stripe per 64-byte cache line
}

// stripeIndex picks a hit counter by the address of the calling goroutine's
// stack, which differs between goroutines and stays put while one runs:
// Go offers no processor or goroutine id, and a counter shared by all
// goroutines would cost a cache-line transfer per hit on a multi-core
// machine. Only the spread matters; any index is correct.
func stripeIndex() int {
	var marker byte
	return int((uint64(uintptr(unsafe.Pointer(&marker))>>13) * 0x9E3779B97F4A7C15) >> (64 - 5))
}

// frame is one link of the chain of computations on a call path, carried in
// the context handed to fn.
type frame struct {
	call   any // *call[V] being computed
	parent *frame
}

type frameKey struct{}

func (f *frame) contains(cl any) bool {
	for ; f != nil; f = f.parent {
		if f.call == cl {
			return true
		}
	}
	return false
}

// call is one computation in flight; done is closed once val and err are set.
// A call is in its shard's inflight map from its start until it finishes or
// Evict or Clear drops it; only then can another call for its key start.
type call[V any] struct {
	done chan struct{}
	val  V
	err  error
	// leaderCtxDone: the computing caller's context had ended when fn
	// returned an error, so the error may be that caller's, not the key's.
	leaderCtxDone bool
	// dropped is set, under the shard's write lock, by the Evict or Clear
	// that took the call out of inflight: its result goes to its callers and
	// is not inserted. Atomic so finish can skip reserving a slot for it
	// without the lock; the decision is taken under the lock.
	dropped atomic.Bool
}

func (c *Cache[T, A, V]) miss(ctx context.Context, s *shard[T, A, V], k key[A], obj *T) (V, error) {
	var zero V
	parent, _ := ctx.Value(frameKey{}).(*frame)
	if !selfEqual(k.args) {
		return c.computeUncached(ctx, s, obj, k.args)
	}
	for {
		v, cl, lead, err := c.claim(s, k, obj, parent)
		switch {
		case v != nil:
			return *v, nil
		case err != nil:
			return zero, err
		case lead:
			return c.compute(ctx, s, k, obj, cl, parent)
		}
		select {
		case <-cl.done:
			if cl.err != nil && cl.leaderCtxDone && ctx.Err() == nil {
				continue // the leader gave up, not the key: try again
			}
			return cl.val, cl.err
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

// claim looks k up under s's write lock and returns one of: the value of an
// entry inserted since Get's lookup; the call in flight for k, to wait for;
// a new call registered for k that the caller must run (lead); or
// ErrRecursive. The lock is released by defer (see lookupNewer).
func (c *Cache[T, A, V]) claim(s *shard[T, A, V], k key[A], obj *T, parent *frame) (v *V, cl *call[V], lead bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[k]; e != nil && e.rec.wp.Value() == obj {
		c.touch(e)
		return e.val.Load(), nil, false, nil
	}
	if cl = s.inflight[k]; cl != nil {
		if parent.contains(cl) {
			return nil, nil, false, ErrRecursive
		}
		s.misses++
		return nil, cl, false, nil
	}
	cl = &call[V]{done: make(chan struct{})}
	s.inflight[k] = cl
	s.misses++
	return nil, cl, true, nil
}

// selfEqual reports whether a == a. It is false for arguments holding a NaN:
// such a key is never found again, so it is computed on every call and never
// cached or registered in flight (where it could never be removed: map
// deletes and lookups of a NaN key find nothing).
func selfEqual[A comparable](a A) bool {
	b := a
	return a == b
}

// computeUncached runs fn for a key that is not equal to itself (see
// selfEqual): a miss with nothing to share, wait for or insert.
func (c *Cache[T, A, V]) computeUncached(ctx context.Context, s *shard[T, A, V], obj *T, args A) (V, error) {
	s.mu.Lock()
	s.misses++
	s.mu.Unlock()
	return c.fn(ctx, obj, args)
}

func (c *Cache[T, A, V]) compute(ctx context.Context, s *shard[T, A, V], k key[A], obj *T, cl *call[V], parent *frame) (V, error) {
	returned := false
	defer func() {
		// fn, or the caller's ctx.Err, panicked (or fn called Goexit):
		// release the waiters with ErrPanicked and unregister the call, then
		// let the panic go on in this goroutine, its caller's.
		if !returned {
			var zero V
			c.finish(s, k, obj, cl, zero, ErrPanicked)
		}
	}()
	v, err := c.fn(context.WithValue(ctx, frameKey{}, &frame{cl, parent}), obj, k.args)
	if err != nil && ctx.Err() != nil {
		cl.leaderCtxDone = true
	}
	returned = true
	c.finish(s, k, obj, cl, v, err)
	return v, err
}

// finish publishes a computation's result and, on success, inserts it unless
// Evict or Clear dropped the call meanwhile.
func (c *Cache[T, A, V]) finish(s *shard[T, A, V], k key[A], obj *T, cl *call[V], v V, err error) {
	reserved := err == nil && !cl.dropped.Load()
	if reserved {
		c.budget.reserve(c, c.shardIndex(k.addr)) // before the shard lock: it may evict
	}
	s.mu.Lock()
	dropped := cl.dropped.Load()
	if !dropped {
		delete(s.inflight, k) // cl's own: nothing replaces a call still in inflight
	}
	freed := 0
	if reserved && !dropped {
		if old := s.m[k]; old != nil {
			// The entry of a collected object whose address obj now has;
			// its cleanup has not run yet.
			s.removeLocked(old)
			freed++
		}
		rec, dropped := s.recForLocked(c, obj)
		freed += dropped
		s.insertLocked(c, k, rec, v)
	}
	s.mu.Unlock()
	c.release(freed)
	if reserved && dropped {
		c.budget.used.Add(-1) // the slot reserved for the dropped result
	}
	cl.val, cl.err = v, err
	close(cl.done)
}

// release gives n slots back to the budget after entries were removed.
func (c *Cache[T, A, V]) release(n int) {
	if n > 0 {
		c.resident.Add(int64(-n))
		c.budget.used.Add(int64(-n))
	}
}

// Evict drops every entry of obj (JAX's evict_weakref). A computation for
// obj in flight is dropped too: it still returns its value to its caller and
// to the callers waiting for it, but the value is not inserted, and a Get
// for its key after Evict computes afresh instead of waiting for it.
// Evict waits for no computation; it costs O(entries of obj + computations
// in flight in obj's shard).
func (c *Cache[T, A, V]) Evict(obj *T) error {
	if obj == nil {
		return ErrNilObject
	}
	addr := uintptr(unsafe.Pointer(obj))
	s := c.shardFor(addr)
	s.mu.Lock()
	// A call in flight at addr is obj's: its Get keeps its object alive, so
	// no other object can have had the address meanwhile.
	for k, cl := range s.inflight {
		if k.addr == addr {
			cl.dropped.Store(true)
			delete(s.inflight, k)
		}
	}
	rec := s.objs[addr]
	n := 0
	if rec != nil && rec.wp.Value() == obj {
		n = s.dropRecLocked(rec)
		s.settleLocked()
	} else {
		rec = nil
	}
	s.mu.Unlock()
	c.release(n)
	if rec != nil {
		rec.cleanup.Stop() // obj is reachable here, as Stop requires
	}
	runtime.KeepAlive(obj)
	return nil
}

// Clear drops every entry and resets the hit and miss counters. Computations
// in flight are dropped as by Evict: they return their values to their
// callers and waiters without inserting them.
func (c *Cache[T, A, V]) Clear() {
	var stops []runtime.Cleanup
	var alive []*T // keeps the objects reachable across Stop, as it requires
	for _, s := range c.shards {
		stops, alive = stops[:0], alive[:0]
		s.mu.Lock()
		n := len(s.m)
		for _, cl := range s.inflight {
			cl.dropped.Store(true)
		}
		clear(s.inflight)
		for _, rec := range s.objs {
			if p := rec.wp.Value(); p != nil {
				stops = append(stops, rec.cleanup)
				alive = append(alive, p)
			}
			rec.dead = true
		}
		s.resetLocked()
		s.misses = 0
		s.mu.Unlock()
		c.release(n)
		for _, st := range stops {
			st.Stop()
		}
		runtime.KeepAlive(alive)
	}
	for i := range c.hits {
		c.hits[i].n.Store(0)
	}
}

// Key is one cached key: the object and the arguments. A Key is a plain
// value; the slice Keys returns belongs to the caller.
type Key[T any, A comparable] struct {
	Obj  *T
	Args A
}

// Keys returns a snapshot of the keys of completed entries whose object is
// still alive, in no particular order. The slice holds the objects strongly
// while the caller keeps it.
func (c *Cache[T, A, V]) Keys() []Key[T, A] {
	var keys []Key[T, A]
	for _, s := range c.shards {
		s.mu.RLock()
		for _, e := range s.m {
			if p := e.rec.wp.Value(); p != nil {
				keys = append(keys, Key[T, A]{p, e.key.args})
			}
		}
		s.mu.RUnlock()
	}
	return keys
}

// Info is a snapshot of a cache's counters, a plain value.
type Info struct {
	Hits     uint64 // lookups answered from the cache
	Misses   uint64 // lookups that computed or waited for a computation
	MaxSize  int    // the bound (of the shared Budget if any); 0 means unbounded
	CurrSize int    // resident entries of this cache
}

// String formats i as functools and JAX do,
// e.g. "Cache(hits=5, misses=10, maxsize=2048, currsize=10)".
func (i Info) String() string {
	return fmt.Sprintf("Cache(hits=%d, misses=%d, maxsize=%d, currsize=%d)", i.Hits, i.Misses, i.MaxSize, i.CurrSize)
}

// Info returns the cache's counters. Each shard is read consistently; the
// shards are read one after another.
func (c *Cache[T, A, V]) Info() Info {
	inf := Info{MaxSize: int(c.budget.max)}
	for i := range c.hits {
		inf.Hits += c.hits[i].n.Load()
	}
	for _, s := range c.shards {
		s.mu.RLock()
		inf.Misses += s.misses
		inf.CurrSize += len(s.m)
		s.mu.RUnlock()
	}
	return inf
}

// cleanupArg is what an object's cleanup holds: the cache only weakly, so a
// dropped cache is collected while its key objects live.
type cleanupArg[T any, A comparable, V any] struct {
	c   weak.Pointer[Cache[T, A, V]]
	rec *objRec[T, A, V]
}

// objectDied runs (on the runtime's cleanup goroutine) after an object with
// entries became unreachable. It takes one shard lock for a moment and never
// waits for a computation.
func objectDied[T any, A comparable, V any](a cleanupArg[T, A, V]) {
	c := a.c.Value()
	if c == nil {
		return // the cache went first
	}
	s := c.shardFor(a.rec.addr)
	s.mu.Lock()
	n := s.dropRecLocked(a.rec)
	s.settleLocked()
	s.mu.Unlock()
	c.release(n)
}
