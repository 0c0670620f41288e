package devalloc

// Memory history: the trace ring buffer, the stacks kept with live blocks,
// and RecordHistory, which switches them at run time with
// torch.cuda.memory._record_memory_history's semantics.

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname nanotime

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
)

// HistoryLevel says what RecordHistory records, as the enabled argument of
// torch.cuda.memory._record_memory_history.
type HistoryLevel string

const (
	// HistoryOff records nothing and clears the trace (PyTorch's None).
	HistoryOff HistoryLevel = "off"
	// HistoryState keeps information about live memory only: the stacks
	// of live blocks (per HistoryOptions.Context), no trace entries.
	HistoryState HistoryLevel = "state"
	// HistoryAll also records every alloc, free and segment event in the
	// trace ring buffer. The default.
	HistoryAll HistoryLevel = "all"
)

// HistoryContext says which stacks are recorded, as the context argument
// of torch.cuda.memory._record_memory_history.
type HistoryContext string

const (
	// ContextNone records no stacks.
	ContextNone HistoryContext = "none"
	// ContextState records the allocating stack of each live block: the
	// "frames" of the snapshot's blocks.
	ContextState HistoryContext = "state"
	// ContextAlloc also gives alloc, segment_alloc, segment_map and oom
	// trace entries the stack of their call, and free entries the
	// allocating stack of the block freed (as PyTorch does).
	ContextAlloc HistoryContext = "alloc"
	// ContextAll also gives free, segment_free and segment_unmap entries
	// the stack of their own call. The default.
	ContextAll HistoryContext = "all"
)

// DefaultHistoryEntries is the trace capacity RecordHistory uses when
// HistoryOptions.MaxEntries is 0: the max_entries PyTorch's memory
// guide passes to _record_memory_history.
const DefaultHistoryEntries = 100000

// HistoryOptions configures RecordHistory. The zero value is PyTorch's
// default call, _record_memory_history(): record everything, with stacks,
// DefaultHistoryEntries trace entries.
type HistoryOptions struct {
	// Enabled is HistoryOff, HistoryState or HistoryAll; "" means
	// HistoryAll.
	Enabled HistoryLevel
	// Context is ContextNone, ContextState, ContextAlloc or ContextAll;
	// "" means ContextAll. Ignored when Enabled is HistoryOff.
	Context HistoryContext
	// MaxEntries bounds the trace ring buffer: once full, each new entry
	// replaces the oldest. 0 means DefaultHistoryEntries; at most
	// 16777216. A smaller bound than before keeps the newest entries.
	MaxEntries int
	// ClearHistory drops the trace recorded so far (HistoryOff always
	// does).
	ClearHistory bool
}

// mode bits of history.mode: what the hot paths record.
const (
	modeTrace   = 1 << 0 // append trace entries
	modeStacksS = 1 << 1 // keep the allocating stack on live blocks (ContextState)
	modeStacksA = 1 << 2 // alloc-side trace entries carry stacks (ContextAlloc)
	modeStacksF = 1 << 3 // free-side trace entries carry their own stack (ContextAll)
)

// history is the trace ring buffer and what the hot paths record. Locking
// rule: mu guards buf, stacks, next and max and is the last lock in the
// allocator's order (Allocator.mu -> history.mu); mode is read without a
// lock by the recording paths and written only by RecordHistory, which
// holds Allocator.mu and mu, so a path that holds Allocator.mu sees the
// mode and the blocks' stacks agree.
//
// The ring holds 32-byte entries with no pointers, so recording one is a
// plain store into memory the garbage collector never scans (100,000
// entries, PyTorch's documented max_entries, are 3.2 MB); stacks, when
// recorded, sit in a parallel slice made on the first entry that has one.
type history struct {
	mode atomic.Uint32
	// unixUS and mono are when the history was made, in Unix
	// microseconds and on the runtime's monotonic clock: an entry's time
	// is unixUS plus the monotonic time since, one vDSO clock read.
	unixUS int64
	mono   int64

	mu     sync.Mutex
	buf    []ringEntry // grows to max, then wraps at next, like PyTorch's RingBuffer
	stacks [][]uintptr // nil, or the stack of buf[i] at i
	next   int
	max    int
}

// ringEntry is a trace entry as recorded: act is the low byte of tact and
// the time in Unix microseconds the rest (2^55 us is a millennium).
type ringEntry struct {
	addr   driver.Ptr // for actOOM: the device's free bytes, as PyTorch's TraceEntry
	size   uint64
	stream uint64
	tact   uint64
}

// histEntry is a trace entry as read back (rawLocked).
type histEntry struct {
	act    action
	addr   driver.Ptr // for actOOM: the device's free bytes, as PyTorch's TraceEntry
	size   uint64
	stream uint64
	t      int64
	pcs    []uintptr
}

// maxStackDepth bounds recorded stacks: the allocator's own frames (up to
// eight on the growth paths, trimmed when the stack is read) plus enough
// of the caller's chain to see through a framework.
const maxStackDepth = 32

func newHistory() *history {
	return &history{mono: nanotime(), unixUS: time.Now().UnixMicro()}
}

// nanotime is the runtime's monotonic clock, which time.Since reads too,
// without time.Time's conversions: about a third of the cost of a trace
// entry went to them.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// nowUS is the time of an entry being recorded, in Unix microseconds.
func (h *history) nowUS() int64 {
	return h.unixUS + (nanotime()-h.mono)/1000
}

// stack captures the caller's stack. The allocator's own frames are
// trimmed when the stack is read (frames), not here: which of them are
// on the stack depends on the path.
func stack() []uintptr {
	pcs := make([]uintptr, maxStackDepth)
	return pcs[:runtime.Callers(2, pcs)]
}

// free-side actions carry their own stack only with ContextAll.
func freeSide(act action) bool {
	return act == actFreeRequested || act == actFreeCompleted || act == actSegmentFree || act == actSegmentUnmap
}

// add records a segment or OOM event, with the caller's stack when the
// context asks for one.
func (h *history) add(act action, addr driver.Ptr, size, stream uint64) {
	m := h.mode.Load()
	if m&modeTrace == 0 {
		return
	}
	var pcs []uintptr
	if freeSide(act) && m&modeStacksF != 0 || !freeSide(act) && m&modeStacksA != 0 {
		pcs = stack()
	}
	h.append(histEntry{act: act, addr: addr, size: size, stream: stream, pcs: pcs})
}

// alloc records an allocation of size requested bytes at addr and returns
// the stack to keep on the block (nil unless ContextState or wider).
func (h *history) alloc(addr driver.Ptr, size, stream uint64) []uintptr {
	m := h.mode.Load()
	var pcs []uintptr
	if m&modeStacksS != 0 {
		pcs = stack()
	}
	if m&modeTrace != 0 {
		e := histEntry{act: actAlloc, addr: addr, size: size, stream: stream}
		if m&modeStacksA != 0 {
			e.pcs = pcs
		}
		h.append(e)
	}
	return pcs
}

// free records a free of the block at addr; allocPCS is the block's
// allocating stack, which the entry carries with ContextAlloc.
func (h *history) free(act action, addr driver.Ptr, size, stream uint64, allocPCS []uintptr) {
	m := h.mode.Load()
	if m&modeTrace == 0 {
		return
	}
	e := histEntry{act: act, addr: addr, size: size, stream: stream}
	switch {
	case m&modeStacksF != 0:
		e.pcs = stack()
	case m&modeStacksA != 0:
		e.pcs = allocPCS
	}
	h.append(e)
}

// freePair records a free that is complete at once (the block was used
// on its own stream only): its free_requested and free_completed entries,
// with one clock read and one lock, as PyTorch records both in the same
// call. allocPCS is the block's allocating stack.
func (h *history) freePair(addr driver.Ptr, size, stream uint64, allocPCS []uintptr) {
	m := h.mode.Load()
	if m&modeTrace == 0 {
		return
	}
	var pcs []uintptr
	switch {
	case m&modeStacksF != 0:
		pcs = stack()
	case m&modeStacksA != 0:
		pcs = allocPCS
	}
	t := h.nowUS()
	h.mu.Lock()
	if h.mode.Load()&modeTrace != 0 { // RecordHistory may have switched it off since
		h.putLocked(ringEntry{addr, size, stream, uint64(t)<<8 | uint64(actFreeRequested)}, pcs)
		h.putLocked(ringEntry{addr, size, stream, uint64(t)<<8 | uint64(actFreeCompleted)}, pcs)
	}
	h.mu.Unlock()
}

func (h *history) append(e histEntry) {
	t := h.nowUS()
	h.mu.Lock()
	if h.mode.Load()&modeTrace != 0 { // RecordHistory may have switched it off since
		h.putLocked(ringEntry{e.addr, e.size, e.stream, uint64(t)<<8 | uint64(e.act)}, e.pcs)
	}
	h.mu.Unlock()
}

// putLocked stores e, with its stack pcs, as the newest entry, replacing
// the oldest once the ring is full: next is where the next entry goes,
// len(buf) while the ring fills. h.mu held.
func (h *history) putLocked(e ringEntry, pcs []uintptr) {
	i := h.next
	if i < len(h.buf) {
		h.buf[i] = e
	} else {
		h.buf = append(h.buf, e)
	}
	if h.next = i + 1; h.next == h.max {
		h.next = 0
	}
	if pcs != nil || h.stacks != nil {
		h.putStackLocked(i, pcs)
	}
}

// putStackLocked sets the stack of entry i, making the stacks on the
// first entry that has one. h.mu held.
func (h *history) putStackLocked(i int, pcs []uintptr) {
	if h.stacks == nil {
		h.stacks = make([][]uintptr, len(h.buf), cap(h.buf))
	}
	if i == len(h.stacks) {
		h.stacks = append(h.stacks, pcs)
	} else {
		h.stacks[i] = pcs
	}
}

// rawLocked returns the ring's entries, oldest first, as a new slice.
// h.mu held.
func (h *history) rawLocked() []histEntry {
	out := make([]histEntry, 0, len(h.buf))
	for _, r := range [2][2]int{{h.next, len(h.buf)}, {0, h.next}} {
		for i := r[0]; i < r[1]; i++ {
			e := h.buf[i]
			he := histEntry{act: action(e.tact & 0xff), addr: e.addr, size: e.size, stream: e.stream, t: int64(e.tact >> 8)}
			if h.stacks != nil {
				he.pcs = h.stacks[i]
			}
			out = append(out, he)
		}
	}
	return out
}

// resizeLocked sets the capacity to n, keeping the newest entries that
// fit. h.mu held.
func (h *history) resizeLocked(n int) {
	if n == h.max {
		return
	}
	raw := h.rawLocked()
	if len(raw) > n {
		raw = raw[len(raw)-n:]
	}
	// Oldest first at 0: when full, it is the one replaced next.
	h.buf, h.stacks, h.next, h.max = nil, nil, 0, n
	for _, e := range raw {
		h.putLocked(ringEntry{e.addr, e.size, e.stream, uint64(e.t)<<8 | uint64(e.act)}, e.pcs)
	}
}

func (h *history) clearLocked() {
	h.buf, h.stacks, h.next = nil, nil, 0
}

// entries converts raw entries to memsnap.TraceEntry, resolving their stacks.
func traceEntries(raw []histEntry) []memsnap.TraceEntry {
	out := make([]memsnap.TraceEntry, len(raw))
	for i, e := range raw {
		out[i] = memsnap.TraceEntry{Action: actionNames[e.act], Addr: uint64(e.addr), Size: e.size, Stream: e.stream, TimeUS: e.t,
			Frames: frames(e.pcs)}
		if e.act == actOOM {
			out[i].Addr, out[i].DeviceFree = 0, uint64(e.addr)
		}
	}
	return out
}

// pkgMethods prefixes the functions of this package's methods: the
// allocator's own frames, which frames trims.
var pkgMethods = reflect.TypeFor[history]().PkgPath() + ".(*"

// frames resolves pcs, dropping the allocator's own frames: everything up
// to its outermost method on the stack (the public call the user made,
// which may sit below evpool's frames when a deferred free completes
// during Alloc). When nothing would be left, the whole stack is kept.
func frames(pcs []uintptr) []memsnap.Frame {
	if len(pcs) == 0 {
		return nil
	}
	var all []memsnap.Frame
	it := runtime.CallersFrames(pcs)
	for {
		f, more := it.Next()
		all = append(all, memsnap.Frame{Filename: f.File, Line: f.Line, Name: f.Function})
		if !more {
			break
		}
	}
	cut := 0
	for i, f := range all {
		if strings.HasPrefix(f.Name, pkgMethods) {
			cut = i + 1
		}
	}
	if cut < len(all) {
		all = all[cut:]
	}
	return all
}

// modeFor returns the mode bits of o, which validate has checked.
func modeFor(o HistoryOptions) uint32 {
	if o.Enabled == HistoryOff {
		return 0
	}
	var m uint32
	if o.Enabled == HistoryAll {
		m |= modeTrace
	}
	switch o.Context {
	case ContextAll:
		m |= modeStacksS | modeStacksA | modeStacksF
	case ContextAlloc:
		m |= modeStacksS | modeStacksA
	case ContextState:
		m |= modeStacksS
	}
	return m
}

// withDefaults fills the zero fields of o and checks the rest.
func (o HistoryOptions) withDefaults() (HistoryOptions, error) {
	if o.Enabled == "" {
		o.Enabled = HistoryAll
	}
	if o.Context == "" {
		o.Context = ContextAll
	}
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultHistoryEntries
	}
	switch {
	case o.Enabled != HistoryOff && o.Enabled != HistoryState && o.Enabled != HistoryAll:
		return o, fmt.Errorf("devalloc: record history: Enabled %q: want %q, %q or %q: %w",
			o.Enabled, HistoryOff, HistoryState, HistoryAll, driver.ErrInvalidValue)
	case o.Context != ContextNone && o.Context != ContextState && o.Context != ContextAlloc && o.Context != ContextAll:
		return o, fmt.Errorf("devalloc: record history: Context %q: want %q, %q, %q or %q: %w",
			o.Context, ContextNone, ContextState, ContextAlloc, ContextAll, driver.ErrInvalidValue)
	case o.MaxEntries < 0 || o.MaxEntries > maxHistoryEntries:
		return o, fmt.Errorf("devalloc: record history: MaxEntries %d: want 0 (default %d) to %d: %w",
			o.MaxEntries, DefaultHistoryEntries, maxHistoryEntries, driver.ErrInvalidValue)
	}
	return o, nil
}

// RecordHistory switches memory history recording while the allocator is
// in use, as torch.cuda.memory._record_memory_history does: what is
// recorded (trace entries, the stacks of live blocks, the stacks of trace
// entries) and how many trace entries are kept. It is safe to call
// concurrently with every other method: it holds the allocator's lock
// while it switches, so an Alloc or Free is recorded wholly under the old
// options or wholly under the new, and Snapshot sees one or the other.
//
// Like PyTorch: HistoryOff clears the trace, ClearHistory clears it too,
// and otherwise the entries recorded so far are kept (the newest
// MaxEntries of them). Unlike PyTorch, HistoryState records no trace
// entries (PyTorch keeps a ring of one), and there is no stacks argument:
// a Go stack has one kind of frame. A block allocated while stacks were
// off has no frames in a snapshot; switching block stacks off (HistoryOff,
// ContextNone) forgets every block's stack. The config keys
// history_entries and history_stacks set the options New starts with.
// Errors name an invalid field and wrap driver.ErrInvalidValue; the
// options in force are then unchanged.
func (a *Allocator) RecordHistory(o HistoryOptions) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recordHistoryLocked(o)
	return nil
}

// recordHistoryLocked applies checked options. a.mu held (or, from New,
// the allocator not yet shared).
func (a *Allocator) recordHistoryLocked(o HistoryOptions) {
	h := a.rec
	m := modeFor(o)
	h.mu.Lock()
	if o.Enabled == HistoryOff || o.ClearHistory {
		h.clearLocked()
	}
	h.resizeLocked(o.MaxEntries)
	h.mode.Store(m)
	h.mu.Unlock()
	if m&modeStacksS == 0 {
		a.forgetStacksLocked()
	}
	a.hist = nil
	if m != 0 {
		a.hist = h
	}
}

// forgetStacksLocked drops every block's recorded stack. a.mu held.
func (a *Allocator) forgetStacksLocked() {
	for fs := a.setHead; fs != nil; fs = fs.nextSet {
		for seg := range fs.segs {
			for b := seg.head; b != nil; b = b.next {
				b.pcs = nil
			}
		}
	}
}

// historyForConfig is the options New starts with for cfg's
// history_entries and history_stacks: a trace of HistoryEntries entries,
// every stack with history_stacks, none without.
func historyForConfig(cfg Config) HistoryOptions {
	if cfg.HistoryEntries == 0 {
		return HistoryOptions{Enabled: HistoryOff}
	}
	o := HistoryOptions{Enabled: HistoryAll, Context: ContextNone, MaxEntries: cfg.HistoryEntries}
	if cfg.HistoryStacks {
		o.Context = ContextAll
	}
	return o
}
