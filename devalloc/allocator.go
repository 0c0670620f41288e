package devalloc

// A caching device allocator with the behaviour of PyTorch's
// CUDACachingAllocator, rebuilt for Go and for any driver.Device.
//
// - Every request is rounded up: to kMinBlockSize (512 B) multiples, or,
//   with roundup_power2_divisions, to the next of N equal divisions of the
//   power-of-two interval the size falls in (fewer distinct sizes, more
//   reuse, at some internal waste).
// - Rounded requests of at most kSmallSize (1 MiB) come from the small pool,
//   whose segments are kSmallBuffer (2 MiB); larger ones from the large
//   pool. Large requests under kMinLargeAlloc (10 MiB) get a kLargeBuffer
//   (20 MiB) segment so that several of them share one driver allocation;
//   larger requests get a segment of their own rounded to kRoundLarge
//   (2 MiB). Fewer, bigger driver calls: cudaMalloc costs ~45 us on an H100.
// - Blocks belong to the stream they were allocated on and are cached per
//   (stream, pool). Reusing a block on its own stream needs no
//   synchronisation: the stream runs in order, so work queued by the next
//   owner starts after work queued by the previous one.
// - A free set is ordered by (size, address); the allocator takes the
//   smallest block that fits (best fit) and splits it when the remainder is
//   worth keeping: >= 512 B in the small pool, > 1 MiB in the large pool (a
//   smaller large-pool remainder would only fragment). Freed blocks merge
//   with free neighbours of the same segment.
// - max_split_size: blocks of plain segments at least that large are
//   "oversize": never split, and never handed to requests below the limit
//   (which would waste most of them). An oversize request may reuse an
//   oversize block at most max_non_split_rounding (default 20 MiB) larger
//   than itself. Blocks of expandable ranges are never oversize (fit.go,
//   Allocator.oversize): PyTorch applies the rules there too and its
//   reserved memory balloons (pytorch/pytorch#123548).
// - RecordStream(p, s) notes that s uses the block. It records nothing at
//   that time: at Free, an event is recorded on every noted stream other
//   than the owner (so work queued on s after the free never delays reuse)
//   and the block stays "pending free" until those events complete
//   (evpool.Deferred.Release). Pending frees are polled at each Alloc and
//   by Poll.
// - With cross_stream_reuse, a stream whose pool has no fit may take a
//   fitting free block cached for another stream: the allocator records an
//   event on the giver stream (covering all work queued before the free)
//   and makes the taker wait on it, with no host synchronisation. The block
//   stays in the giver's segment; at Free the taker's stream is treated as
//   a noted stream.
// - When the device is out of memory (or the limit is reached): complete
//   every pending free (host synchronisation), release every cached whole
//   segment, retry once; then fail with an *OOMError that says where the
//   memory is and what to try. The release takes what index.go keeps
//   listed, so it costs what it releases, not a scan of every stream's
//   cache.
// - Release before growing (default; release_before_grow:false is
//   PyTorch's policy): before a miss reserves a new plain segment, cached
//   whole segments of the large pool, any stream, are released oldest
//   freed first until they cover it; with expandable segments, other
//   streams' free large-pool pages are unmapped before mapping (only
//   streams with no queued work: that path holds mu and never waits), and
//   only as many as the mapping would take past the most ever reserved:
//   below that mark an unmap lowers no peak and the owner maps the page
//   again later. PyTorch keeps them until an allocation fails, when the
//   peak is already there.
// - garbage_collection_threshold: before growing, when reserved memory
//   would pass that fraction of the limit, release cached whole segments,
//   the ones freed longest ago first.
// - expandable_segments on a driver.VMM device: reserved virtual ranges
//   per (stream, pool) (another only when live blocks leave no run long
//   enough in the first); a miss maps granularity pages into the lowest
//   unmapped hole that, with the free blocks beside it, fits the request
//   (one SetAccess per mapped range, since SetAccess dominates the cost on
//   CUDA), so freed memory and new pages merge and fragmentation stays near
//   zero. EmptyCache and the OOM path unmap every free whole page, between
//   live blocks too. Devices without VMM fall back to plain segments and
//   Stats says so.
//
// Concurrency. One mutex, Allocator.mu, guards the free sets, every block
// and segment, the pointer -> block map and the counters, so a cache hit
// or a free is exactly one critical section (one lock pair), and a
// Snapshot under that lock sees blocks and stats agree. PyTorch, too,
// guards a device's free sets and stats with one mutex (its pointer map
// has 67 more). A hit pair is 75-80 ns of work here (BenchmarkHitPair,
// default Config, on the 2-vCPU developer machine), and the earlier design
// (a lock per (stream, pool), 64 pointer-map shards and a stats lock:
// three lock pairs per operation, since exact peak stats need one global
// order anyway) spent more on the extra lock pairs than it gained: 233-237
// ns per HitPair against 202-212 with one lock, and no better 8-goroutine
// churn. Unlike PyTorch, the plain-segment grow path drops the lock
// around the driver's Malloc (~45 us on an H100) and the release path
// waits for streams and calls the driver's Free outside it, so one
// stream's miss does not stall every other stream's hits.
// The free sets themselves are found and created under mu too (an index
// by stream ID, see index.go), so a set can be dropped when it holds no
// segment without racing a lookup.
//   - history.mu guards the trace ring buffer (a leaf). Allocator.hist,
//     the hot paths' one-load test of "is history on", is guarded by mu;
//     Allocator.rec, the recorder itself, never changes, so paths without
//     mu record through it (history.go).
// Lock order: mu -> history.mu. Expandable-segment growth and shrink call
// the VMM driver API under mu. Event callbacks (evpool.Deferred) run with
// no allocator lock held. Close takes the same locks as the other paths,
// so it may run concurrently with them.
//
// Where to read (one file per concept):
//   - allocator.go: the public surface (this file).
//   - block.go: blocks, segments, free sets, and the block-list links.
//   - blockset.go: the (size, address) ordered free set: best fit.
//   - fit.go: rounding, fitting, splitting a block taken, merging one freed.
//   - grow.go: new plain segments and the reserved-bytes limit.
//   - expandable.go: expandable segments; the range type owns its VMM calls.
//   - streams.go: how a block comes back after a cross-stream free
//     (evpool.Deferred.Release), and cross_stream_reuse.
//   - release.go: EmptyCache, the OOM path's release, garbage collection.
//   - index.go: the indexes that find free sets and what a release takes.
//   - passthrough.go: the uncached resource, and Open choosing by Backend.
//   - errors.go, oom.go: errors and the out-of-memory report.
//   - stats.go, summary.go, snapshot.go, pickle.go, history.go,
//     ptrtable.go, config.go: counters, the memory summary, snapshots
//     and their pickle form, the trace and RecordHistory, the pointer
//     table, the configuration.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

// Allocator is a caching device allocator for one device. It is safe for
// concurrent use by any number of goroutines, Close included.
type Allocator struct {
	// Locking rule (detailed in the note at the top of allocator.go): mu
	// guards free sets and their index, blocks, segments, the pointer map and
	// the counters, and hist (whether history is recorded); no driver call on
	// the hit path and none for plain segments is made under it. Lock order:
	// mu -> history.mu.

	dev         driver.Device
	cfg         Config
	vmm         driver.VMM // non-nil when expandable segments are in use
	gran        uint64
	expFallback bool // expandable segments asked for, device lacks VMM
	maxSplit    uint64
	maxNonSplit uint64
	total       uint64
	// pow2Rounding: some roundup_power2_divisions interval has more than
	// one division, so roundSize must look the size's interval up.
	pow2Rounding bool

	evs *evpool.Pool
	def *evpool.Deferred

	mu   sync.Mutex
	ptrs ptrTable // live blocks by address
	st   counters

	// The free sets and the release indexes (index.go), guarded by mu.
	dense            []*freeSet          // index stream ID*2+small, IDs < denseStreams
	sparse           map[setKey]*freeSet // larger IDs
	setHead, setTail *freeSet            // every set, in creation order
	numSets          int
	rel              releaseIndex
	emptyRanges      map[*segment]struct{} // expandable ranges with nothing mapped
	// visits counts the sets and blocks the slow paths (release, OOM,
	// garbage collection, cross-stream reuse) have looked at: the work
	// tests check scales with what those paths do, not with the streams.
	visits uint64

	reserved atomic.Uint64 // bytes reserved from the device (limit accounting)
	limit    atomic.Uint64 // 0: no limit
	// highWater is the most memory ever reserved (ResetPeakStats leaves it
	// alone): with expandable segments, release-before-growing unmaps only
	// what would take reserved memory past it (releaseTarget).
	highWater atomic.Uint64
	clock     atomic.Uint64 // allocator misses so far

	// hist is rec while RecordHistory records anything, else nil: the
	// hot paths' test, guarded by mu. rec is set by New and never
	// changes; it has its own lock (history.go).
	hist *history
	rec  *history
	// missOK and missFailed count Allocs that missed the cache (found no
	// block on the first lookup) and then succeeded or failed; hits are
	// derived from them (stats.go), so the hit path counts nothing.
	missOK, missFailed atomic.Uint64
	vmmAvail           bool      // the device offers usable VMM, asked for or not
	oomOut             io.Writer // where each OOM's full diagnostic goes (EnvOOMVerbose), or nil
	lastOOM            atomic.Pointer[string]
	closed             atomic.Bool

	snapWritten func() // test hook: called after each signal snapshot
}

// New returns an allocator for dev. It fails on an invalid cfg.
func New(dev driver.Device, cfg Config) (*Allocator, error) {
	if dev == nil {
		return nil, fmt.Errorf("devalloc: nil device: %w", driver.ErrInvalidValue)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Backend == BackendPassthrough {
		return nil, fmt.Errorf("%w: backend passthrough: New builds the caching allocator; use Open, which returns a Passthrough for it, or NewPassthrough", ErrConfig)
	}
	_, total, err := dev.MemInfo()
	if err != nil {
		return nil, fmt.Errorf("devalloc: device %d: meminfo: %w", dev.Ordinal(), err)
	}
	a := &Allocator{
		dev:         dev,
		cfg:         cfg,
		maxSplit:    cfg.MaxSplitSize,
		maxNonSplit: cfg.MaxNonSplitRounding,
		total:       total,
	}
	if a.maxNonSplit == 0 {
		a.maxNonSplit = kLargeBuffer
	}
	for _, d := range cfg.RoundupPower2Divisions {
		a.pow2Rounding = a.pow2Rounding || d > 1
	}
	v, ok := driver.AsVMM(dev)
	a.vmmAvail = ok && v.Granularity() > 0 && v.Granularity()&(v.Granularity()-1) == 0
	if cfg.ExpandableSegments {
		if a.vmmAvail {
			a.vmm, a.gran = v, v.Granularity()
		} else {
			a.expFallback = true
		}
	}
	if cfg.MemoryFraction > 0 {
		a.limit.Store(uint64(cfg.MemoryFraction * float64(total)))
	}
	if a.oomOut, err = oomWriter(os.Getenv, os.Stderr); err != nil {
		return nil, err
	}
	a.evs = evpool.NewPool(dev, evpool.PoolOptions{})
	a.def = evpool.NewDeferred(a.evs)
	a.rel.gran = a.gran
	a.rec = newHistory()
	o, err := historyForConfig(cfg).withDefaults()
	if err != nil { // validate has checked HistoryEntries
		return nil, err
	}
	a.recordHistoryLocked(o)
	return a, nil
}

// Device returns the allocator's device.
func (a *Allocator) Device() driver.Device { return a.dev }

// Config returns the configuration the allocator was created with.
func (a *Allocator) Config() Config { return a.cfg }

// resolveStream resolves s for op on a resource of dev: nil is the
// device's default stream, as NULL is in CUDA; a stream of another device
// is an error.
func resolveStream(dev driver.Device, s driver.Stream, op string) (driver.Stream, error) {
	s = driver.StreamOr(dev, s)
	if s.Device() != dev {
		return nil, fmt.Errorf("devalloc: %s: stream %d belongs to another device, not device %d: %w", op, s.ID(), dev.Ordinal(), driver.ErrInvalidValue)
	}
	return s, nil
}

// checkAlloc checks a non-empty Alloc on a resource of dev: it resolves s
// and refuses a stream of another device, a size over maxRequest and a
// closed resource. It is small enough to inline into the hit path; the
// errors are built out of line.
func checkAlloc(dev driver.Device, closed *atomic.Bool, size uint64, s driver.Stream) (driver.Stream, error) {
	s = driver.StreamOr(dev, s)
	if s.Device() != dev || size > maxRequest || closed.Load() {
		return nil, allocError(dev, closed, size, s)
	}
	return s, nil
}

// sameValue reports whether x and y hold the same dynamic type and the
// same data word, which implies x == y (a pointer-shaped stream is its data
// word; any other is boxed, and one box holds one value) without the
// runtime call that == on interfaces makes. False does not imply x != y:
// the caller then checks in full. The hit path's test of its set's stream.
func sameValue(x, y driver.Stream) bool {
	type iface struct{ tab, data unsafe.Pointer }
	px, py := (*iface)(unsafe.Pointer(&x)), (*iface)(unsafe.Pointer(&y))
	return px.tab == py.tab && px.data == py.data
}

// allocError is the error checkAlloc refused with.
func allocError(dev driver.Device, closed *atomic.Bool, size uint64, s driver.Stream) error {
	if _, err := resolveStream(dev, s, "alloc"); err != nil {
		return err
	}
	if size > maxRequest {
		return errSize(size)
	}
	if closed.Load() {
		return ErrClosed
	}
	return nil
}

// Alloc returns size bytes of device memory for use on stream s. The block
// may be reused for other requests on s as soon as it is freed; to use it
// on another stream too, call RecordStream. A nil s is the device's
// default stream, as NULL is in CUDA. Alloc(0, s) returns (0, nil).
// Errors: a stream of another device, a size over 1 PiB
// (driver.ErrInvalidValue), *OOMError when memory is exhausted.
func (a *Allocator) Alloc(size uint64, s driver.Stream) (driver.Ptr, error) {
	if size == 0 {
		return 0, nil
	}
	if s == nil || size > maxRequest || a.closed.Load() {
		var err error
		if s, err = checkAlloc(a.dev, &a.closed, size, s); err != nil {
			return 0, err
		}
	}
	if a.def.Pending() > 0 { // one atomic load when nothing is deferred
		a.def.Poll()
	}
	rsize := a.roundSize(size)
	small := rsize <= kSmallSize
	id := s.ID()
	var b *block
	checked := false
	a.mu.Lock()
	fs := a.lookupLocked(id, small)
	if fs != nil && sameValue(fs.stream, s) {
		// The set's own stream, whose device was checked when the set
		// was made: the hit path asks s nothing more, and the block is
		// known to be used on its owner's stream (block.own).
		checked = true
		if b = a.hitLocked(fs, rsize, size); b == nil {
			b = a.takeLocked(fs, rsize, size, s, true)
		}
	}
	a.mu.Unlock()
	if b != nil {
		return b.ptr, nil
	}
	if !checked {
		// The stream's first allocation in the pool, or a stream value
		// other than the one its set was made with: check it in full.
		var err error
		if s, err = checkAlloc(a.dev, &a.closed, size, s); err != nil {
			return 0, err
		}
		if fs != nil {
			a.mu.Lock()
			if fs = a.lookupLocked(id, small); fs != nil {
				b = a.takeLocked(fs, rsize, size, s, evpool.SameStream(s, fs.stream))
			}
			a.mu.Unlock()
			if b != nil {
				return b.ptr, nil
			}
		}
	}
	p, err := a.allocSlow(id, small, rsize, size, s)
	if err != nil {
		a.missFailed.Add(1)
	} else {
		a.missOK.Add(1)
	}
	return p, err
}

func (a *Allocator) allocSlow(id uint64, small bool, rsize, size uint64, s driver.Stream) (driver.Ptr, error) {
	a.clock.Add(1)
	if a.cfg.CrossStreamReuse {
		if b := a.takeCross(id, small, rsize, size, s); b != nil {
			return b.ptr, nil
		}
	}
	if a.cfg.GarbageCollectionThreshold > 0 {
		need := rsize
		if a.vmm == nil {
			need = allocationSize(rsize)
		}
		a.garbageCollect(need)
	}
	if a.vmm == nil && !a.cfg.KeepCacheOnGrow {
		a.releaseBeforeGrow(allocationSize(rsize))
	}
	b, err := a.takeOrGrow(id, small, rsize, size, s)
	if err == nil {
		return b.ptr, nil
	}
	if !errors.Is(err, driver.ErrOutOfMemory) {
		return 0, fmt.Errorf("devalloc: alloc %d bytes on stream %d: %w", size, s.ID(), err)
	}
	// Out of memory: complete pending frees, release every cached whole
	// segment, and retry once.
	a.count(func(c *counters) { c.numAllocRetries++ })
	// Best effort: whether the retry finds memory is what the caller
	// hears, as before the lint pass.
	_ = a.releaseAll()
	b, err = a.takeOrGrow(id, small, rsize, size, s)
	if err == nil {
		return b.ptr, nil
	}
	if !errors.Is(err, driver.ErrOutOfMemory) {
		return 0, fmt.Errorf("devalloc: alloc %d bytes on stream %d: %w", size, s.ID(), err)
	}
	return 0, a.oom(size, rsize, s, err)
}

// takeOrGrow takes a fit from the set of (id, pool), or grows that set,
// creating it if the stream holds nothing in the pool; a set left empty by
// a failed grow is dropped again.
func (a *Allocator) takeOrGrow(id uint64, small bool, rsize, size uint64, s driver.Stream) (*block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fs := a.lookupLocked(id, small)
	if fs == nil {
		fs = a.createSetLocked(s, id, small)
	} else if b := a.takeLocked(fs, rsize, size, s, evpool.SameStream(s, fs.stream)); b != nil {
		return b, nil
	}
	var b *block
	var err error
	if a.vmm != nil {
		b, err = a.growExpandableLocked(fs, rsize, size, s)
	} else {
		b, err = a.growLocked(fs, rsize, size, s)
	}
	if err != nil {
		a.dropIfEmptyLocked(fs)
	}
	return b, err
}

// Free returns p to the cache. When p was noted with RecordStream on other
// streams, it becomes reusable only after the work queued on them so far
// has finished (evpool.Deferred.Release: events, else a host wait). If
// nothing can show that work over (a lost device), Free returns an error
// wrapping evpool.ErrNotReleased and p stays live and the caller's, to be
// freed again later. Free(0) is a no-op; an unknown or already freed
// pointer is an error wrapping driver.ErrInvalidPointer and changes
// nothing.
func (a *Allocator) Free(p driver.Ptr) error {
	if p == 0 {
		return nil
	}
	err := a.free(p)
	if err == nil && a.closed.Load() {
		// After Close nothing caches: the block's segment goes back to
		// the device once it holds no live block. Checked after the free,
		// so a Free racing Close is covered whichever went first.
		err = a.releaseAll()
	}
	return err
}

// RecordStream notes that the block at p is used by work on s, so that a
// later Free does not let the block be reused before the work queued on s
// up to that Free has finished. It records nothing now. A nil s is the
// default stream. Noting the allocation stream is a no-op;
// RecordStream(0, s) is a no-op. An unknown
// pointer or a stream of another device is an error and changes nothing.
func (a *Allocator) RecordStream(p driver.Ptr, s driver.Stream) error {
	s, err := resolveStream(a.dev, s, "record stream")
	if err != nil {
		return err
	}
	if p == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.ptrs.get(p)
	if b == nil {
		return fmt.Errorf("devalloc: record stream %d on %v: not a live allocation of this allocator: %w", s.ID(), p, driver.ErrInvalidPointer)
	}
	if !evpool.SameStream(s, b.set.stream) {
		if b.uses == nil {
			b.uses = new(evpool.StreamSet)
		}
		b.uses.Add(s)
		b.own = false
	}
	return nil
}

// HoldsStream reports whether the allocator holds device memory for
// stream s: a segment, cached or in use, in one of s's pools. Cached
// memory stays until EmptyCache, the OOM path or garbage collection
// releases it. When HoldsStream reports false and no allocation made on s
// (or noted on s with RecordStream) is live or pending free, the allocator
// keeps nothing for s: destroying s strands no cached memory, and a stream
// created later starts with an empty cache as s would have.
func (a *Allocator) HoldsStream(s driver.Stream) bool {
	s = driver.StreamOr(a.dev, s)
	id := s.ID()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookupLocked(id, true) != nil || a.lookupLocked(id, false) != nil
}

// Poll returns to the cache every pending free whose streams have
// finished, without blocking (PyTorch's process_events); Alloc does this
// on its own. It returns how many blocks it returned.
func (a *Allocator) Poll() int {
	return a.def.Poll()
}

// Drain waits for every pending free's streams and returns those blocks
// to the cache (a host synchronisation, counted in num_sync_all_streams,
// as PyTorch's synchronize_and_free_events). Errors of failed stream work
// are returned.
func (a *Allocator) Drain() error {
	a.count(func(c *counters) { c.numSyncAllStreams++ })
	return a.def.Drain()
}

// EmptyCache waits for pending frees and releases every cached segment that
// holds no live block (and, for expandable segments, every free whole page,
// between live blocks too) back to the device. Live blocks are untouched.
func (a *Allocator) EmptyCache() error {
	return a.releaseAll()
}

// Close refuses later Allocs with ErrClosed, waits for pending frees and
// releases every cached segment and free page to the device, as
// EmptyCache does, and destroys the allocator's idle events. Memory the
// caller still holds stays valid: Close never frees under a live pointer.
// Freeing it after Close returns it straight to the device (its segment
// once no live block is left in it), waiting on the host for the streams
// it was noted on, so nothing leaks either way. Close is idempotent (a
// second call returns nil) and safe to call concurrently with every other
// method; Free, RecordStream, Poll, Drain, EmptyCache and the read-only
// methods keep working after it.
func (a *Allocator) Close() error {
	if a.closed.Swap(true) {
		return nil
	}
	err := a.releaseAll()
	// Frees deferred from now on find the pool closed and wait on the
	// host instead (evpool.Deferred.Release).
	return errors.Join(err, a.evs.Close())
}

// SetLimit caps the bytes the allocator reserves from the device (0: no
// cap). Live blocks are untouched; the cap applies to later growth. A cap
// below what is reserved now makes growth fail until memory is released.
func (a *Allocator) SetLimit(bytes uint64) { a.limit.Store(bytes) }

// SetMemoryFraction caps reserved memory at fraction f of the device total,
// like torch.cuda.set_per_process_memory_fraction. f must be in (0, 1].
func (a *Allocator) SetMemoryFraction(f float64) error {
	if !(f > 0 && f <= 1) {
		return fmt.Errorf("devalloc: memory fraction %v: want a number in (0, 1]: %w", f, driver.ErrInvalidValue)
	}
	a.limit.Store(uint64(f * float64(a.total)))
	return nil
}

// Limit returns the cap set by SetLimit or SetMemoryFraction (0: none).
func (a *Allocator) Limit() uint64 { return a.limit.Load() }

// LastOOM returns the message of the last OOMError, or "".
func (a *Allocator) LastOOM() string {
	if p := a.lastOOM.Load(); p != nil {
		return *p
	}
	return ""
}
