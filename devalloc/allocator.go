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
// - max_split_size: blocks at least that large are "oversize": never split,
//   and never handed to requests below the limit (which would waste most of
//   them). An oversize request may reuse an oversize block at most
//   max_non_split_rounding (default 20 MiB) larger than itself.
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
// - garbage_collection_threshold: before growing, when reserved memory
//   would pass that fraction of the limit, release cached whole segments,
//   the ones freed longest ago (in allocator misses) first; among those
//   freed in the same interval, the one freed first.
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
// has 67 more). A hit pair is ~130 ns of work here, and the earlier design
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
//   - history.mu guards the trace ring buffer (a leaf).
// Lock order: mu -> history.mu. Expandable-segment growth and shrink call
// the VMM driver API under mu. Event callbacks (evpool.Deferred) run with
// no allocator lock held.

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

// Sizes, named as in PyTorch, with their reasons.
const (
	// kMinBlockSize: every size is a multiple of it; alignment for any
	// element type and vectorised access, and the smallest useful split.
	kMinBlockSize = 512
	// kSmallSize: requests up to 1 MiB are "small" and share 2 MiB segments.
	kSmallSize = 1 << 20
	// kSmallBuffer: the small pool's segment size.
	kSmallBuffer = 2 << 20
	// kLargeBuffer: segment size for large requests under kMinLargeAlloc, so
	// that several 1-10 MiB tensors share one driver allocation.
	kLargeBuffer = 20 << 20
	// kMinLargeAlloc: from here on a request gets a segment of its own.
	kMinLargeAlloc = 10 << 20
	// kRoundLarge: rounding of those own segments (the driver's page size).
	kRoundLarge = 2 << 20
	// maxRequest: larger requests are refused as bad input rather than
	// sent to the driver: no device has a petabyte, and the rounding
	// arithmetic stays far from overflow.
	maxRequest = 1 << 50
)

// ErrClosed is returned by Alloc after Close; it wraps driver.ErrClosed.
var ErrClosed = fmt.Errorf("devalloc: allocator closed: %w", driver.ErrClosed)

type blockState uint8

const (
	stateFree blockState = iota
	stateAllocated
	statePendingFree // freed by the caller, waiting for noted streams
	stateUnmapped    // a hole in an expandable range: address space only
)

// block is a piece of a segment. Guarded by Allocator.mu.
type block struct {
	ptr         driver.Ptr
	size        uint64
	requested   uint64
	seg         *segment
	prev, next  *block
	state       blockState
	allocStream driver.Stream
	uses        evpool.StreamSet // streams noted by RecordStream, less the owner
	freedAt     uint64 // allocator clock (misses) when last freed, for GC
	hidx        int32  // position in its free-set class heap while free
	rlist       uint8  // the release list it is on while free (index.go)
	rprev       *block // neighbours on that list
	rnext       *block
}

// segment is one driver allocation, or one expandable virtual range.
type segment struct {
	ptr        driver.Ptr
	size       uint64 // bytes; for an expandable range, its reserved address space
	set        *freeSet
	head, tail *block
	exp        *expandable
}

type setKey struct {
	stream uint64
	small  bool
}

// freeSet is the cache of one (stream, pool). Guarded by Allocator.mu.
type freeSet struct {
	stream driver.Stream
	id     uint64 // stream.ID()
	small  bool
	free   blockSet
	segs   map[*segment]struct{}
	exps   []*segment // expandable ranges, oldest first
	// pins counts grows in flight with mu released (growLocked): the set
	// is not dropped under them.
	pins             int
	dropped          bool
	prevSet, nextSet *freeSet // Allocator's set list, creation order
	// dead holds blocks absorbed by a merge, reused by the next split so
	// that a cache hit does not allocate. A merged-away free block is
	// referenced by nothing else: free blocks are in no pointer map or
	// pending free, snapshots and history copy values, not *block, and
	// garbageCollect rechecks its candidates' ptr under the lock.
	dead []*block
}

// maxDeadBlocks bounds fs.dead: enough for the split/merge churn of a
// busy set, small enough that a set that shrank holds little garbage.
const maxDeadBlocks = 64

// newBlock returns a recycled block, or a new one. a.mu held.
func (fs *freeSet) newBlock() *block {
	if n := len(fs.dead); n > 0 {
		b := fs.dead[n-1]
		fs.dead[n-1] = nil
		fs.dead = fs.dead[:n-1]
		return b
	}
	return new(block)
}

// recycle keeps b, just merged away, for a later split. a.mu held.
func (fs *freeSet) recycle(b *block) {
	if len(fs.dead) < maxDeadBlocks {
		*b = block{}
		fs.dead = append(fs.dead, b)
	}
}

// Allocator is a caching device allocator for one device. It is safe for
// concurrent use by any number of goroutines, except Close, which must not
// run concurrently with other calls.
//
// Locking rule (detailed in the note at the top of allocator.go): mu
// guards free sets and their index, blocks, segments, the pointer map and
// the counters; no driver call on the hit path and none for plain segments
// is made under it. Lock order: mu -> history.mu.
type Allocator struct {
	dev         driver.Device
	cfg         Config
	vmm         driver.VMM // non-nil when expandable segments are in use
	gran        uint64
	expFallback bool // expandable segments asked for, device lacks VMM
	maxSplit    uint64
	maxNonSplit uint64
	total       uint64

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
	clock    atomic.Uint64 // allocator misses so far: the GC's notion of age

	hist    *history
	lastOOM atomic.Pointer[string]
	closed  atomic.Bool

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
	if cfg.ExpandableSegments {
		if v, ok := driver.AsVMM(dev); ok && v.Granularity() > 0 && v.Granularity()&(v.Granularity()-1) == 0 {
			a.vmm, a.gran = v, v.Granularity()
		} else {
			a.expFallback = true
		}
	}
	a.evs = evpool.NewPool(dev, evpool.PoolOptions{})
	a.def = evpool.NewDeferred(a.evs)
	a.rel.gran = a.gran
	if cfg.HistoryEntries > 0 {
		a.hist = newHistory(cfg.HistoryEntries, cfg.HistoryStacks)
	}
	return a, nil
}

// Device returns the allocator's device.
func (a *Allocator) Device() driver.Device { return a.dev }

// Config returns the configuration the allocator was created with.
func (a *Allocator) Config() Config { return a.cfg }

// stream resolves s for op: nil is the device's default stream, as NULL
// is in CUDA; a stream of another device is an error.
func (a *Allocator) stream(s driver.Stream, op string) (driver.Stream, error) {
	s = driver.StreamOr(a.dev, s)
	if s.Device() != a.dev {
		return nil, fmt.Errorf("devalloc: %s: stream %d belongs to another device, not device %d: %w", op, s.ID(), a.dev.Ordinal(), driver.ErrInvalidValue)
	}
	return s, nil
}

// roundSize is PyTorch's round_size.
func (a *Allocator) roundSize(size uint64) uint64 {
	if size < kMinBlockSize {
		return kMinBlockSize
	}
	if d := a.divisions(size); d > 1 && size > kMinBlockSize*d {
		return roundupPower2Division(size, d)
	}
	return (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize
}

func (a *Allocator) divisions(size uint64) uint64 {
	idx := bits.Len64(size) - 1 - 20 // intervals start at 1 MiB
	idx = max(0, min(idx, RoundupIntervals-1))
	return a.cfg.RoundupPower2Divisions[idx]
}

// roundupPower2Division rounds size up to the next of d equal steps between
// the powers of two around it.
func roundupPower2Division(size, d uint64) uint64 {
	if size&(size-1) == 0 {
		return size
	}
	floor := uint64(1) << (bits.Len64(size) - 1)
	step := floor >> (bits.Len64(d) - 1)
	if step == 0 {
		return floor << 1
	}
	r := size &^ (step - 1)
	if r == size {
		return size
	}
	return r + step
}

// allocationSize is PyTorch's get_allocation_size: the segment to create
// for a rounded request.
func allocationSize(rsize uint64) uint64 {
	switch {
	case rsize <= kSmallSize:
		return kSmallBuffer
	case rsize < kMinLargeAlloc:
		return kLargeBuffer
	}
	return (rsize + kRoundLarge - 1) / kRoundLarge * kRoundLarge
}

func poolIdx(small bool) int {
	if small {
		return poolSmall
	}
	return poolLarge
}

// denseStreams: streams with IDs below it find their free sets by index
// in Allocator.dense rather than by hashing; others use Allocator.sparse.
const denseStreams = 1024

func boolBit(b bool) uint {
	if b {
		return 1
	}
	return 0
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
	s, err := a.stream(s, "alloc")
	if err != nil {
		return 0, err
	}
	if size > maxRequest {
		return 0, errSize(size)
	}
	if a.closed.Load() {
		return 0, ErrClosed
	}
	if a.def.Pending() > 0 { // one atomic load when nothing is deferred
		a.def.Poll()
	}
	rsize := a.roundSize(size)
	small := rsize <= kSmallSize
	id := s.ID()
	var b *block
	a.mu.Lock()
	if fs := a.lookupLocked(id, small); fs != nil {
		b = a.takeLocked(fs, rsize, size, s)
	}
	a.mu.Unlock()
	if b != nil {
		return b.ptr, nil
	}
	return a.allocSlow(id, small, rsize, size, s)
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
	} else if b := a.takeLocked(fs, rsize, size, s); b != nil {
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

// fitsLocked applies the oversize rules to a candidate block.
func (a *Allocator) fits(b *block, rsize uint64) bool {
	if a.maxSplit == 0 {
		return true
	}
	if rsize < a.maxSplit && b.size >= a.maxSplit {
		return false // do not hand an oversize block to a small request
	}
	if rsize >= a.maxSplit && b.size >= rsize+a.maxNonSplit {
		return false // nor one far larger than an oversize request
	}
	return true
}

// takeLocked takes the best fit from fs and commits it. a.mu held.
func (a *Allocator) takeLocked(fs *freeSet, rsize, size uint64, s driver.Stream) *block {
	b := fs.free.best(rsize)
	if b == nil || !a.fits(b, rsize) {
		return nil
	}
	fs.free.remove(b)
	a.commitLocked(fs, b, rsize, size, s)
	return b
}

// inactiveSplit reports whether b counts in the inactive_split stats: a
// free block of a plain segment that is split.
func inactiveSplit(b *block) bool {
	return b.state == stateFree && b.seg.exp == nil && (b.prev != nil || b.next != nil)
}

func (a *Allocator) shouldSplit(fs *freeSet, b *block, rsize uint64) bool {
	rem := b.size - rsize
	if fs.small || b.seg.exp != nil {
		return rem >= kMinBlockSize
	}
	return (a.maxSplit == 0 || rsize < a.maxSplit) && rem > kSmallSize
}

// commitLocked marks b (already out of the free set) allocated for a
// request, splitting off the remainder, and publishes it in the pointer
// map. a.mu held.
func (a *Allocator) commitLocked(fs *freeSet, b *block, rsize, size uint64, s driver.Stream) {
	c, pool := &a.st, poolIdx(fs.small)
	if inactiveSplit(b) {
		c.dec(stInactiveSplit, pool, 1)
		c.dec(stInactiveSplitBytes, pool, int64(b.size))
	}
	if a.shouldSplit(fs, b, rsize) {
		r := fs.newBlock()
		*r = block{ptr: b.ptr + driver.Ptr(rsize), size: b.size - rsize, seg: b.seg, freedAt: b.freedAt}
		insertAfter(b, r)
		b.size = rsize
		fs.free.insert(r)
		if inactiveSplit(r) {
			c.inc(stInactiveSplit, pool, 1)
			c.inc(stInactiveSplitBytes, pool, int64(r.size))
		}
	}
	b.state = stateAllocated
	b.requested = size
	b.allocStream = s
	c.inc(stAllocation, pool, 1)
	c.inc(stAllocatedBytes, pool, int64(b.size))
	c.inc(stRequestedBytes, pool, int64(size))
	c.inc(stActive, pool, 1)
	c.inc(stActiveBytes, pool, int64(b.size))
	if a.maxSplit != 0 && b.size >= a.maxSplit {
		c.oversizeAllocations.add(1)
	}
	c.numAllocs++
	c.largestAlloc = max(c.largestAlloc, b.size)
	a.ptrs.put(b.ptr, b)
	if a.hist != nil {
		a.hist.add(actAlloc, b.ptr, b.size, s.ID())
	}
}

// growLocked creates a plain segment for the request and commits a block
// from it. a.mu held, but released around the driver call: nothing refers
// to the new segment until it is published below, a concurrent miss on
// the same set at worst grows the cache by one more segment, and the pin
// keeps a release from dropping fs meanwhile.
func (a *Allocator) growLocked(fs *freeSet, rsize, size uint64, s driver.Stream) (*block, error) {
	segSize := allocationSize(rsize)
	fs.pins++
	a.mu.Unlock()
	p, err := a.deviceMalloc(segSize)
	a.mu.Lock()
	fs.pins--
	if err != nil {
		return nil, err
	}
	seg := &segment{ptr: p, size: segSize, set: fs}
	b := &block{ptr: p, size: segSize, seg: seg, freedAt: a.clock.Load()}
	seg.head, seg.tail = b, b
	fs.segs[seg] = struct{}{}
	var d delta
	d.pool = poolIdx(fs.small)
	d.add(stSegment, 1)
	d.add(stReservedBytes, int64(segSize))
	if a.maxSplit != 0 && segSize >= a.maxSplit {
		d.oversizeSeg = 1
	}
	d.deviceAllocs = 1
	a.applyLocked(&d)
	if a.hist != nil {
		a.hist.add(actSegmentAlloc, p, segSize, fs.stream.ID())
	}
	a.commitLocked(fs, b, rsize, size, s)
	return b, nil
}

// errLimit is the cause of an OOM when the allocator's own limit, not the
// device, refused memory.
var errLimit = errors.New("allocator memory limit reached (SetLimit or SetMemoryFraction)")

// reserve counts n bytes against the limit; false if they do not fit.
func (a *Allocator) reserve(n uint64) bool {
	for {
		cur := a.reserved.Load()
		if l := a.limit.Load(); l != 0 && cur+n > l {
			return false
		}
		if a.reserved.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (a *Allocator) unreserve(n uint64) { a.reserved.Add(-n) }

func (a *Allocator) deviceMalloc(n uint64) (driver.Ptr, error) {
	if !a.reserve(n) {
		return 0, fmt.Errorf("%w: %w", errLimit, driver.ErrOutOfMemory)
	}
	p, err := a.dev.Malloc(n)
	if err != nil {
		a.unreserve(n)
		return 0, err
	}
	return p, nil
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

// free is Free's work: the block back to its free set, now or once its
// streams' work is over.
func (a *Allocator) free(p driver.Ptr) error {
	a.mu.Lock()
	b := a.ptrs.del(p)
	if b == nil {
		a.mu.Unlock()
		return fmt.Errorf("devalloc: free %v: not a live allocation of this allocator (unknown pointer or double free): %w", p, driver.ErrInvalidPointer)
	}
	uses := b.uses
	b.uses = evpool.StreamSet{}
	fs := b.seg.set
	if a.hist != nil {
		a.hist.add(actFreeRequested, b.ptr, b.size, b.allocStream.ID())
	}
	if uses.Len() == 0 && evpool.SameStream(b.allocStream, fs.stream) {
		// The common case: used only on its own stream, which runs in
		// order, so the block is reusable at once.
		a.freeLocked(fs, b)
		a.mu.Unlock()
		return nil
	}
	// Wait for the allocation stream (it differs from the owner after a
	// cross-stream reuse) and the noted streams, never for the owner.
	var wait evpool.StreamSet
	wait.Add(b.allocStream)
	wait.AddSet(uses)
	wait.Remove(fs.stream)
	a.markPendingLocked(fs, b, true)
	a.mu.Unlock()
	err := a.def.Release(wait, func() {
		a.mu.Lock()
		a.freeLocked(fs, b)
		a.mu.Unlock()
	})
	if err == nil {
		return nil
	}
	// evpool.ErrNotReleased: nothing showed the streams' work over, so the
	// block goes back to the caller exactly as it was.
	a.mu.Lock()
	defer a.mu.Unlock()
	a.markPendingLocked(fs, b, false)
	b.uses = uses
	a.ptrs.put(p, b)
	return fmt.Errorf("devalloc: free %v: the block is still live and the caller's; free it again later: %w", p, err)
}

// markPendingLocked moves b between allocated and pending free (undo with
// pending false). a.mu held.
func (a *Allocator) markPendingLocked(fs *freeSet, b *block, pending bool) {
	sign := int64(1)
	if pending {
		sign = -1
		b.state = statePendingFree
	} else {
		b.state = stateAllocated
	}
	var d delta
	d.pool = poolIdx(fs.small)
	d.add(stAllocation, sign)
	d.add(stAllocatedBytes, sign*int64(b.size))
	d.add(stRequestedBytes, sign*int64(b.requested))
	if a.maxSplit != 0 && b.size >= a.maxSplit {
		d.oversizeAlloc = sign
	}
	a.applyLocked(&d)
}

// freeLocked returns an allocated or pending block to the free set, merging
// it with free neighbours. a.mu held.
func (a *Allocator) freeLocked(fs *freeSet, b *block) {
	c, pool := &a.st, poolIdx(fs.small)
	if b.state == stateAllocated {
		c.dec(stAllocation, pool, 1)
		c.dec(stAllocatedBytes, pool, int64(b.size))
		c.dec(stRequestedBytes, pool, int64(b.requested))
		if a.maxSplit != 0 && b.size >= a.maxSplit {
			c.oversizeAllocations.add(-1)
		}
	}
	c.dec(stActive, pool, 1)
	c.dec(stActiveBytes, pool, int64(b.size))
	ptr, size, stream := b.ptr, b.size, b.allocStream
	b.state = stateFree
	b.uses = evpool.StreamSet{}
	b.allocStream = nil
	b.requested = 0
	b.freedAt = a.clock.Load()
	for _, n := range [2]*block{b.prev, b.next} {
		if n == nil || n.state != stateFree {
			continue
		}
		if inactiveSplit(n) {
			c.dec(stInactiveSplit, pool, 1)
			c.dec(stInactiveSplitBytes, pool, int64(n.size))
		}
		fs.free.remove(n)
		absorb(b, n)
		fs.recycle(n)
	}
	if inactiveSplit(b) {
		c.inc(stInactiveSplit, pool, 1)
		c.inc(stInactiveSplitBytes, pool, int64(b.size))
	}
	fs.free.insert(b)
	if a.hist != nil {
		var sid uint64
		if stream != nil {
			sid = stream.ID()
		}
		a.hist.add(actFreeCompleted, ptr, size, sid)
	}
}

// RecordStream notes that the block at p is used by work on s, so that a
// later Free does not let the block be reused before the work queued on s
// up to that Free has finished. It records nothing now. A nil s is the
// default stream. Noting the allocation stream is a no-op;
// RecordStream(0, s) is a no-op. An unknown
// pointer or a stream of another device is an error and changes nothing.
func (a *Allocator) RecordStream(p driver.Ptr, s driver.Stream) error {
	s, err := a.stream(s, "record stream")
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
	owner := b.allocStream
	if b.seg != nil {
		owner = b.seg.set.stream
	}
	if !evpool.SameStream(s, owner) {
		b.uses.Add(s)
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

// releaseAll completes pending frees and releases every cached whole
// plain segment and every free whole page of the expandable ranges, from
// the release indexes (index.go): it costs what it releases.
func (a *Allocator) releaseAll() error {
	a.count(func(c *counters) { c.numSyncAllStreams++ })
	var errs []error
	if err := a.def.Drain(); err != nil {
		errs = append(errs, err)
	}
	a.mu.Lock()
	victims := a.takeWholeLocked(math.MaxUint64)
	if a.vmm != nil {
		errs = append(errs, a.shrinkLocked())
	}
	a.mu.Unlock()
	errs = append(errs, a.freeSegments(victims))
	return errors.Join(errs...)
}

// takeWholeLocked takes cached whole plain segments out of the cache,
// oldest freed first, until they add up to target bytes or none is left,
// and returns their blocks for freeSegments. Once out of the free sets no
// one can take them. a.mu held.
func (a *Allocator) takeWholeLocked(target uint64) []*block {
	var victims []*block
	var freed uint64
	for freed < target && a.rel.whole.head != nil {
		a.visits++
		b := a.rel.whole.head
		fs := b.seg.set
		fs.free.remove(b)
		delete(fs.segs, b.seg)
		pool := poolIdx(fs.small)
		a.st.dec(stSegment, pool, 1)
		a.st.dec(stReservedBytes, pool, int64(b.size))
		if a.maxSplit != 0 && b.size >= a.maxSplit {
			a.st.oversizeSegments.add(-1)
		}
		victims = append(victims, b)
		freed += b.size
		a.dropIfEmptyLocked(fs)
	}
	return victims
}

// freeSegments gives segments taken by takeWholeLocked back to the device.
//
// A block freed on its own stream is reusable at once, but work queued on
// that stream may still touch it: each stream is synchronised before its
// memory goes back to the device (cudaFree synchronises likewise). A
// failed stream's work will never run, so its error is no reason to keep
// the memory.
func (a *Allocator) freeSegments(victims []*block) error {
	if len(victims) == 0 {
		return nil
	}
	synced := make(map[*freeSet]bool)
	for _, b := range victims {
		if fs := b.seg.set; !synced[fs] {
			synced[fs] = true
			_ = fs.stream.Synchronize() // a failed stream's error changes nothing here
		}
	}
	var errs []error
	for _, b := range victims {
		if e := a.dev.Free(b.ptr); e != nil {
			errs = append(errs, fmt.Errorf("devalloc: release segment %v: %w", b.ptr, e))
		}
		a.unreserve(b.size)
		if a.hist != nil {
			a.hist.add(actSegmentFree, b.ptr, b.size, b.seg.set.id)
		}
	}
	a.count(func(c *counters) { c.numDeviceFree += int64(len(victims)) })
	return errors.Join(errs...)
}

// garbageCollect releases cached whole segments, oldest freed first, until
// reserving need more bytes stays under the GC threshold of the limit.
func (a *Allocator) garbageCollect(need uint64) {
	limit := a.limit.Load()
	if limit == 0 {
		limit = a.total
	}
	threshold := uint64(a.cfg.GarbageCollectionThreshold * float64(limit))
	reserved := a.reserved.Load()
	if reserved+need <= threshold {
		return
	}
	a.mu.Lock()
	victims := a.takeWholeLocked(reserved + need - threshold)
	a.mu.Unlock()
	// The segments are out of the cache either way; a driver error on
	// their Free is no reason to fail the allocation that collected them.
	_ = a.freeSegments(victims)
	if len(victims) > 0 {
		a.count(func(c *counters) { c.numGCReleases++ })
	}
}

// takeCross takes a fitting free block from another stream's set of the
// same pool, the first set in creation order that has one, and orders the
// requester after the giver's work. It looks at no set when no free block
// of the pool is large enough, and at a set only when its largest block
// is.
func (a *Allocator) takeCross(id uint64, small bool, rsize, size uint64, s driver.Stream) *block {
	var b *block
	var giver *freeSet
	a.mu.Lock()
	if a.largestFreeLocked(small) >= rsize {
		for fs := a.setHead; fs != nil && b == nil; fs = fs.nextSet {
			a.visits++
			if fs.small != small || fs.id == id {
				continue
			}
			if l := fs.free.largest(); l == nil || l.size < rsize {
				continue
			}
			b, giver = a.takeLocked(fs, rsize, size, s), fs
		}
	}
	a.mu.Unlock()
	if b == nil {
		return nil
	}
	if err := a.orderAfter(s, giver.stream); err != nil {
		// The taker never used the block: give it straight back.
		a.mu.Lock()
		a.ptrs.del(b.ptr)
		a.freeLocked(giver, b)
		a.mu.Unlock()
		return nil
	}
	a.count(func(c *counters) { c.numCrossStreamReuse++ })
	return b
}

// orderAfter makes later work on s wait for the work queued on giver now.
func (a *Allocator) orderAfter(s, giver driver.Stream) error {
	ev, err := a.evs.Get()
	if err != nil {
		return err
	}
	if err := ev.Record(giver); err != nil {
		a.evs.Put(ev)
		return err
	}
	err = s.WaitEvent(ev)
	// WaitEvent captures the event's position, so the event can be
	// recycled at once.
	a.evs.Put(ev)
	return err
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
