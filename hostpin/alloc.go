package hostpin

// Design of the pinned host allocator.
//
// Page-locked host memory is what makes a host<->device copy asynchronous,
// and getting it is slow: on an H100 machine cuMemHostAlloc takes 0.8 ms
// for 4 KiB..1 MiB, 6.5 ms at 16 MiB and 123 ms at 256 MiB, and freeing it
// costs a third of that. So buffers are cached and handed out again.
//
// Classes. Requests round up to size classes (class.go), four per power of
// two by default, so a buffer is at most 1.25x its request; a cached buffer
// up to 1.25x larger than the request also serves it (the search walks the
// next classes up to that ratio), so large buffers are reused rather than
// left idle beside a fresh allocation. Above PageOnlyThreshold (64 MiB) the
// classes would waste up to 16 MiB per buffer, so requests round only to the
// host page and reuse is by the same 1.25x ratio.
//
// Slabs. Classes below slabClassLimit (64 KiB) are carved from shared
// slabs of slabSize (1 MiB), one class per slab: those class sizes (5, 6,
// 7 KiB, ...) are not page multiples, and a small driver allocation costs as
// much as a large one (0.82 ms for 4 KiB against 0.83 ms for 1 MiB), so one
// driver call buys a whole slab of buffers. A slab goes back to the driver
// only as a whole, once every piece is idle (EmptyCache or the cap).
//
// Stream-ordered reuse. RecordStream notes the streams whose queued work
// reads or writes a buffer; Free then records an event on each (through an
// evpool.Deferred) and the buffer becomes reusable only once those events
// complete. Completions are collected by polling at the next Alloc (cost:
// the streams with pending work, not the pending buffers) and by EmptyCache.
//
// Cap. Idle bytes above Options.CacheCap (2 GiB) are returned to the driver
// oldest first: a standalone buffer or a wholly idle slab is one unit on an
// age list. Idle pieces of a slab still in use cannot be returned alone and
// stay cached.
//
// Driver calls (HostAlloc, HostFree, event records) are made outside the
// allocator's lock: they take milliseconds, and other callers must keep
// hitting the cache meanwhile.

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

const (
	// defaultCacheCap bounds idle cached bytes: enough for a few 256 MiB
	// staging buffers and the chunks of many concurrent copies, small beside
	// the host RAM of an accelerator machine.
	defaultCacheCap = 2 << 30

	// defaultPageOnlyThreshold is where class rounding stops: a class step
	// above 64 MiB is 16 MiB or more of pinned RAM, so larger requests round
	// to the page only.
	defaultPageOnlyThreshold = 64 << 20

	// slabClassLimit: classes below it are carved from slabs. From 64 KiB up
	// every class is a page multiple and a driver call is cheap beside the
	// copies such a buffer serves.
	slabClassLimit = 64 << 10

	// slabSize is the driver allocation carved into small buffers: it costs
	// the same driver time as 4 KiB (see above) and holds 18 buffers of the
	// largest slab class, 256 of the smallest.
	slabSize = 1 << 20

	// defaultMaxSize is the largest request accepted: 1 TiB is beyond the
	// pinnable RAM of any host, so anything larger is a caller's bug (such
	// as a negative length converted to int) and is refused before the
	// driver sees it.
	defaultMaxSize = 1 << 40
)

// Errors returned by the allocator. Invalid sizes also match
// driver.ErrInvalidValue.
var (
	ErrInvalidSize   = errors.New("hostpin: invalid size")
	ErrDoubleFree    = errors.New("hostpin: buffer already freed")
	ErrForeignBuffer = errors.New("hostpin: buffer belongs to another allocator")
	ErrNilBuffer     = errors.New("hostpin: nil buffer")
	ErrClosed        = errors.New("hostpin: allocator closed")
)

// Options configures an Allocator. The zero value gives the defaults.
type Options struct {
	// ClassesPerDoubling is the number of size classes per power of two:
	// 1, 2, 4, 8 or 16 (0 means 4, keeping handed-out sizes within 1.25x).
	ClassesPerDoubling int
	// CacheCap bounds the idle bytes kept cached; beyond it idle buffers go
	// back to the driver oldest first. 0 means 2 GiB; negative is an error.
	CacheCap int64
	// PageOnlyThreshold: requests above it round to the host page instead of
	// a class. 0 means 64 MiB; negative is an error.
	PageOnlyThreshold int
	// MaxSize is the largest request accepted. 0 means 1 TiB.
	MaxSize int
	// Disabled passes every Alloc and Free straight to the driver (buffers
	// of the exact size, no cache), for A/B measurements. RecordStream is
	// still honoured: the driver free waits for the recorded streams.
	Disabled bool
}

// Stats are an allocator's counters since New. Sizes are handed-out sizes
// (class or page rounded), not requested lengths.
type Stats struct {
	Requests uint64 // Alloc calls that returned a buffer, size 0 included
	Hits     uint64 // served from the cache
	Misses   uint64 // needed a driver allocation (of a slab, a buffer, or in Disabled mode)

	BytesInUse    int64 // handed out and not freed
	BytesPending  int64 // freed, waiting for recorded streams
	BytesCached   int64 // idle, ready for reuse
	BytesReserved int64 // held from the driver (slabs count whole)
	PeakInUse     int64 // highest BytesInUse
	PeakReserved  int64 // highest BytesReserved

	DriverAllocs    uint64        // HostAlloc calls that succeeded
	DriverFrees     uint64        // HostFree calls
	DriverAllocTime time.Duration // total time in HostAlloc
	DriverAllocMax  time.Duration // longest HostAlloc
	DriverFreeTime  time.Duration // total time in HostFree
	DriverFreeMax   time.Duration // longest HostFree
	Evictions       uint64        // units (buffers or slabs) freed by the cap
	Leaked          uint64        // buffers never reused: their streams could not be waited for
}

// Buffer is one allocation from an Allocator. Bytes has the requested
// length; the memory stays valid until Free (and, after RecordStream, may
// be read or written by the recorded streams' queued work until it runs).
//
// A Buffer may be passed between goroutines; Free and RecordStream on one
// Buffer are safe to call concurrently (the allocator serialises them), but
// Bytes after Free is a use after free.
type Buffer struct {
	a   *Allocator
	blk *block
	n   int

	// guarded by a.mu
	freed   bool
	streams []driver.Stream
}

// Bytes returns the buffer's memory, of the requested length. Its capacity
// is its length, so appending never writes past it into a neighbour.
func (b *Buffer) Bytes() []byte {
	if b.blk == nil {
		return nil
	}
	return b.blk.mem[:b.n:b.n]
}

// Len is the requested length.
func (b *Buffer) Len() int { return b.n }

// Cap is the size of the pinned block behind the buffer: the class or page
// rounded size, or a cached block up to 1.25x the request.
func (b *Buffer) Cap() int {
	if b.blk == nil {
		return 0
	}
	return len(b.blk.mem)
}

type blockState uint8

const (
	stateIdle blockState = iota
	stateInUse
	statePending
)

// block is one pinned region handed out whole: a HostBuffer of its own
// (hb != nil) or a piece of a slab.
type block struct {
	mem    []byte
	hb     *driver.HostBuffer
	slab   *slab
	bucket int
	state  blockState

	prev, next *block  // bucket free list, while idle
	age        ageNode // age list, standalone blocks only
}

// slab is a driver allocation carved into equal blocks of one class.
type slab struct {
	hb     *driver.HostBuffer
	pieces []*block
	busy   int // pieces not idle
	age    ageNode
}

// ageNode links an evictable unit (an idle standalone block or a wholly
// idle slab) into the allocator's age list, oldest at the front.
type ageNode struct {
	prev, next *ageNode
	blk        *block
	slab       *slab
	linked     bool
}

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

// Allocator caches pinned host buffers of one device. It is safe for
// concurrent use.
//
// Locking: mu guards every field below it (free lists, age list, buffer
// states, Buffer.freed and Buffer.streams, stats). It is never held across a
// driver call or a call into evpool: HostAlloc/HostFree and event records run
// with mu released, and Deferred callbacks (run by Poll/Drain outside
// Deferred's lock) take mu themselves. pendingN is an atomic so the hit path
// skips Poll when nothing waits.
type Allocator struct {
	dev      driver.Device
	opts     Options
	perDbl   int
	pageSize int
	events   *evpool.Pool
	deferred *evpool.Deferred
	pendingN atomic.Int64

	mu      sync.Mutex
	closed  bool
	buckets []blockList
	age     ageNode // sentinel: age.next is the oldest unit
	stats   Stats
}

// New returns an allocator of dev's pinned host memory.
func New(dev driver.Device, opts Options) (*Allocator, error) {
	if dev == nil {
		return nil, fmt.Errorf("hostpin: nil device: %w", driver.ErrInvalidValue)
	}
	switch d := opts.ClassesPerDoubling; {
	case d == 0:
		opts.ClassesPerDoubling = defaultPerDoubling
	case d < 0 || d > maxPerDoubling || d&(d-1) != 0:
		return nil, fmt.Errorf("hostpin: ClassesPerDoubling %d: want 1, 2, 4, 8 or 16 (0 for 4): %w", d, driver.ErrInvalidValue)
	}
	switch {
	case opts.CacheCap == 0:
		opts.CacheCap = defaultCacheCap
	case opts.CacheCap < 0:
		return nil, fmt.Errorf("hostpin: CacheCap %d: want >= 0 bytes (0 for 2 GiB): %w", opts.CacheCap, driver.ErrInvalidValue)
	}
	switch {
	case opts.PageOnlyThreshold == 0:
		opts.PageOnlyThreshold = defaultPageOnlyThreshold
	case opts.PageOnlyThreshold < 0:
		return nil, fmt.Errorf("hostpin: PageOnlyThreshold %d: want >= 0 bytes (0 for 64 MiB): %w", opts.PageOnlyThreshold, driver.ErrInvalidValue)
	}
	switch {
	case opts.MaxSize == 0:
		opts.MaxSize = defaultMaxSize
	case opts.MaxSize < 0:
		return nil, fmt.Errorf("hostpin: MaxSize %d: want >= 0 bytes (0 for 1 TiB): %w", opts.MaxSize, driver.ErrInvalidValue)
	}
	a := &Allocator{
		dev:      dev,
		opts:     opts,
		perDbl:   opts.ClassesPerDoubling,
		pageSize: max(os.Getpagesize(), minClassSize),
		events:   evpool.NewPool(dev, evpool.PoolOptions{}),
	}
	a.deferred = evpool.NewDeferred(a.events)
	a.age.next, a.age.prev = &a.age, &a.age
	// One bucket per class up to the largest handed-out size; page-rounded
	// buffers share the bucket of the class just below them.
	top := max(classSize(opts.MaxSize, a.perDbl), roundUp(opts.MaxSize, a.pageSize))
	a.buckets = make([]blockList, bucketIndex(top, a.perDbl)+1)
	return a, nil
}

// Device returns the allocator's device.
func (a *Allocator) Device() driver.Device { return a.dev }

// Options returns the options in effect, defaults filled in.
func (a *Allocator) Options() Options { return a.opts }

// rounded is the size a fresh block for a request of n > 0 bytes has.
func (a *Allocator) rounded(n int) int {
	if n > a.opts.PageOnlyThreshold {
		return roundUp(n, a.pageSize)
	}
	return classSize(n, a.perDbl)
}

// RoundedSize is the size of the block a fresh allocation of n bytes gets
// (0 for n <= 0); a cached block serving n may be up to 1.25x n.
func (a *Allocator) RoundedSize(n int) int {
	if n <= 0 {
		return 0
	}
	if a.opts.Disabled {
		return n
	}
	return a.rounded(n)
}

// Alloc returns a pinned buffer of size bytes. Size 0 gives an empty buffer
// without a driver call; a negative size or one above Options.MaxSize is
// ErrInvalidSize. Driver failures are returned wrapped (errors.Is
// driver.ErrOutOfMemory works); on out of memory the idle cache is released
// and the allocation tried once more.
func (a *Allocator) Alloc(size int) (*Buffer, error) {
	if size < 0 || size > a.opts.MaxSize {
		return nil, fmt.Errorf("%w %d: want 0..%d bytes: %w", ErrInvalidSize, size, a.opts.MaxSize, driver.ErrInvalidValue)
	}
	if a.pendingN.Load() > 0 {
		a.deferred.Poll()
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, ErrClosed
	}
	a.stats.Requests++
	if size == 0 {
		a.mu.Unlock()
		return &Buffer{a: a}, nil
	}
	if a.opts.Disabled {
		a.stats.Misses++
		a.mu.Unlock()
		hb, err := a.hostAlloc(size)
		if err != nil {
			a.undoRequest()
			return nil, err
		}
		blk := &block{mem: hb.Bytes()[:size:size], hb: hb, state: stateInUse}
		a.mu.Lock()
		a.useLocked(blk)
		a.mu.Unlock()
		return &Buffer{a: a, blk: blk, n: size}, nil
	}
	want := a.rounded(size)
	limit := reuseLimit(size, want)
	if blk := a.takeLocked(want, limit); blk != nil {
		a.stats.Hits++
		a.mu.Unlock()
		return &Buffer{a: a, blk: blk, n: size}, nil
	}
	a.stats.Misses++
	a.mu.Unlock()

	var (
		blk *block
		err error
	)
	if want < slabClassLimit && size <= a.opts.PageOnlyThreshold {
		blk, err = a.allocSlab(want)
	} else {
		blk, err = a.allocStandalone(want)
	}
	if err != nil {
		a.undoRequest()
		return nil, err
	}
	return &Buffer{a: a, blk: blk, n: size}, nil
}

// undoRequest takes back the Requests and Misses counts of a failed Alloc.
func (a *Allocator) undoRequest() {
	a.mu.Lock()
	a.stats.Requests--
	a.stats.Misses--
	a.mu.Unlock()
}

// hostAlloc calls the driver, timing the call, and on out of memory
// releases the idle cache and tries once more.
func (a *Allocator) hostAlloc(size int) (*driver.HostBuffer, error) {
	hb, err := a.timedHostAlloc(size)
	if errors.Is(err, driver.ErrOutOfMemory) {
		if n, _ := a.releaseIdle(); n > 0 {
			hb, err = a.timedHostAlloc(size)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("hostpin: pinned allocation of %d bytes: %w", size, err)
	}
	return hb, nil
}

func (a *Allocator) timedHostAlloc(size int) (*driver.HostBuffer, error) {
	t0 := time.Now()
	hb, err := a.dev.HostAlloc(size)
	d := time.Since(t0)
	if err != nil {
		return nil, err
	}
	if hb == nil || hb.Len() < size {
		return nil, fmt.Errorf("driver returned a %d-byte buffer for %d bytes: %w", bufLen(hb), size, driver.ErrInvalidValue)
	}
	a.mu.Lock()
	a.stats.DriverAllocs++
	a.stats.DriverAllocTime += d
	a.stats.DriverAllocMax = max(a.stats.DriverAllocMax, d)
	a.stats.BytesReserved += int64(hb.Len())
	a.stats.PeakReserved = max(a.stats.PeakReserved, a.stats.BytesReserved)
	a.mu.Unlock()
	return hb, nil
}

func bufLen(hb *driver.HostBuffer) int {
	if hb == nil {
		return 0
	}
	return hb.Len()
}

// hostFree returns hb to the driver, timing the call.
func (a *Allocator) hostFree(hb *driver.HostBuffer) error {
	n := hb.Len()
	t0 := time.Now()
	err := a.dev.HostFree(hb)
	d := time.Since(t0)
	a.mu.Lock()
	a.stats.DriverFrees++
	a.stats.DriverFreeTime += d
	a.stats.DriverFreeMax = max(a.stats.DriverFreeMax, d)
	a.stats.BytesReserved -= int64(n)
	a.mu.Unlock()
	if err != nil {
		return fmt.Errorf("hostpin: pinned free of %d bytes: %w", n, err)
	}
	return nil
}

func (a *Allocator) allocStandalone(want int) (*block, error) {
	hb, err := a.hostAlloc(want)
	if err != nil {
		return nil, err
	}
	blk := &block{mem: hb.Bytes()[:want:want], hb: hb, bucket: bucketIndex(want, a.perDbl)}
	blk.age.blk = blk
	a.mu.Lock()
	a.useLocked(blk)
	a.mu.Unlock()
	return blk, nil
}

// allocSlab gets a fresh slab of class want, hands out its first piece and
// caches the rest.
func (a *Allocator) allocSlab(want int) (*block, error) {
	hb, err := a.hostAlloc(slabSize)
	if err != nil {
		return nil, err
	}
	mem := hb.Bytes()
	sl := &slab{hb: hb, pieces: make([]*block, slabSize/want)}
	sl.age.slab = sl
	bucket := bucketIndex(want, a.perDbl)
	for i := range sl.pieces {
		sl.pieces[i] = &block{mem: mem[i*want : (i+1)*want : (i+1)*want], slab: sl, bucket: bucket}
	}
	a.mu.Lock()
	first := sl.pieces[0]
	for _, p := range sl.pieces[1:] {
		a.buckets[bucket].push(p)
		a.stats.BytesCached += int64(want)
	}
	sl.busy = 1
	a.useLocked(first)
	victims := a.trimLocked()
	a.mu.Unlock()
	// The allocation succeeded; units the cap evicted are out of the cache
	// (and counted in Stats) whether or not the driver's free of them fails.
	_ = a.freeUnits(victims)
	return first, nil
}

// useLocked marks a fresh block in use and counts it.
func (a *Allocator) useLocked(blk *block) {
	blk.state = stateInUse
	a.stats.BytesInUse += int64(len(blk.mem))
	a.stats.PeakInUse = max(a.stats.PeakInUse, a.stats.BytesInUse)
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
					a.unlinkAge(&b.slab.age)
				}
				b.slab.busy++
			} else {
				a.unlinkAge(&b.age)
			}
			a.useLocked(b)
			return b
		}
	}
	return nil
}

func (a *Allocator) pushAge(n *ageNode) {
	n.prev, n.next = a.age.prev, &a.age
	a.age.prev.next = n
	a.age.prev = n
	n.linked = true
}

func (a *Allocator) unlinkAge(n *ageNode) {
	if !n.linked {
		return
	}
	n.prev.next = n.next
	n.next.prev = n.prev
	n.prev, n.next, n.linked = nil, nil, false
}

// unit is a driver allocation on its way back to the driver.
type unit = *driver.HostBuffer

// evictOldestLocked removes the oldest evictable unit from the cache and
// returns its buffer, or nil when none is left.
func (a *Allocator) evictOldestLocked() unit {
	n := a.age.next
	if n == &a.age {
		return nil
	}
	a.unlinkAge(n)
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

// freeUnits returns evicted units to the driver; the first error is returned.
func (a *Allocator) freeUnits(units []unit) error {
	var errs []error
	for _, u := range units {
		if err := a.hostFree(u); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// releaseLocked makes a block that is no longer used by anyone idle (or,
// after Close or in Disabled mode, returns what can go to the driver).
func (a *Allocator) releaseLocked(b *block) []unit {
	size := int64(len(b.mem))
	if a.opts.Disabled {
		b.state = stateIdle
		return []unit{b.hb}
	}
	b.state = stateIdle
	a.buckets[b.bucket].push(b)
	a.stats.BytesCached += size
	if sl := b.slab; sl != nil {
		sl.busy--
		if sl.busy == 0 {
			a.pushAge(&sl.age)
		}
	} else {
		a.pushAge(&b.age)
	}
	if a.closed {
		var all []unit
		for u := a.evictOldestLocked(); u != nil; u = a.evictOldestLocked() {
			all = append(all, u)
		}
		return all
	}
	return a.trimLocked()
}

// RecordStream notes that work queued on s uses b, so that after Free the
// buffer is reused only once the work queued on s at Free time completes.
// Recording the same stream twice is harmless.
func (a *Allocator) RecordStream(b *Buffer, s driver.Stream) error {
	if err := a.check(b); err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("hostpin: RecordStream with a nil stream: %w", driver.ErrInvalidValue)
	}
	if b.blk == nil {
		return nil // empty buffer: nothing to protect
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if b.freed {
		return fmt.Errorf("hostpin: RecordStream after Free: %w", ErrDoubleFree)
	}
	id := s.ID()
	for _, t := range b.streams {
		if t.ID() == id {
			return nil
		}
	}
	b.streams = append(b.streams, s)
	return nil
}

func (a *Allocator) check(b *Buffer) error {
	if b == nil {
		return ErrNilBuffer
	}
	if b.a != a {
		return ErrForeignBuffer
	}
	return nil
}

// Free gives b back. Without recorded streams the buffer is reusable at
// once; otherwise an event is recorded on each recorded stream now and the
// buffer is reusable once they complete. Freeing twice is ErrDoubleFree and
// freeing another allocator's buffer ErrForeignBuffer; neither changes any
// state.
//
// When the events cannot be recorded, Free waits for the streams instead;
// when that fails too, the buffer is never reused (Stats.Leaked) and Free
// returns the error.
func (a *Allocator) Free(b *Buffer) error {
	if err := a.check(b); err != nil {
		return err
	}
	a.mu.Lock()
	if b.freed {
		a.mu.Unlock()
		return ErrDoubleFree
	}
	b.freed = true
	blk := b.blk
	if blk == nil {
		a.mu.Unlock()
		return nil
	}
	streams := b.streams
	b.streams = nil
	size := int64(len(blk.mem))
	a.stats.BytesInUse -= size
	if len(streams) == 0 {
		victims := a.releaseLocked(blk)
		a.mu.Unlock()
		return a.freeUnits(victims)
	}
	blk.state = statePending
	a.stats.BytesPending += size
	a.pendingN.Add(1)
	a.mu.Unlock()

	complete := func() error {
		a.mu.Lock()
		a.stats.BytesPending -= size
		victims := a.releaseLocked(blk)
		a.mu.Unlock()
		a.pendingN.Add(-1)
		return a.freeUnits(victims)
	}
	err := a.deferred.Defer(streams, func(error) {
		// A sticky stream error still means the stream's work up to the
		// event is over, so the buffer is free of it. This runs from a later
		// Poll, Alloc or Close, after Free returned: no caller is left to
		// tell of a driver free failure (Stats still counts the free).
		_ = complete()
	})
	if err == nil {
		return nil
	}
	var syncErrs []error
	for _, s := range streams {
		if e := s.Synchronize(); e != nil {
			syncErrs = append(syncErrs, e)
		}
	}
	if len(syncErrs) == 0 {
		return complete()
	}
	a.mu.Lock()
	a.stats.BytesPending -= size
	a.stats.Leaked++
	a.mu.Unlock()
	a.pendingN.Add(-1)
	return fmt.Errorf("hostpin: free: recording stream events failed (%w) and waiting for the streams failed (%w); the buffer is set aside, never reused",
		err, errors.Join(syncErrs...))
}

// releaseIdle polls for completed frees and returns every idle unit to the
// driver; it reports how many units went.
func (a *Allocator) releaseIdle() (int, error) {
	if a.pendingN.Load() > 0 {
		a.deferred.Poll()
	}
	a.mu.Lock()
	var units []unit
	for u := a.evictOldestLocked(); u != nil; u = a.evictOldestLocked() {
		units = append(units, u)
	}
	a.mu.Unlock()
	return len(units), a.freeUnits(units)
}

// EmptyCache returns every idle buffer, and every slab whose pieces are all
// idle, to the driver. Buffers in use or waiting for their streams stay.
func (a *Allocator) EmptyCache() error {
	_, err := a.releaseIdle()
	return err
}

// Poll makes buffers whose recorded streams have completed reusable and
// reports how many. Alloc and EmptyCache poll on their own; Poll is for
// callers that want the Stats to be current.
func (a *Allocator) Poll() int { return a.deferred.Poll() }

// Stats returns a snapshot of the counters.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// Close waits for pending frees, returns all idle memory to the driver and
// refuses later Allocs with ErrClosed. Buffers still in use stay valid;
// freeing them later returns their memory to the driver (a slab once all its
// pieces are back).
func (a *Allocator) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	// Drain also reports the sticky errors of failed streams; those belong to
	// the streams' owners, and the buffers waiting on them are released
	// either way, so they are not the allocator's to return.
	_ = a.deferred.Drain()
	return a.EmptyCache()
}
