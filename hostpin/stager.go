package hostpin

// Design of the Stager.
//
// Pageable Go memory cannot be the source or target of an asynchronous copy
// (the GC may move or free it before the copy runs, and the driver's own
// pageable path runs at 7 GB/s on an H100 machine against 55 GB/s pinned),
// so a copy goes through pinned chunks from a Source (an Allocator, or a
// Direct for A/B runs).
//
// A call splits its bytes into chunks and takes InFlight slots (one pinned
// Buffer, one event per slot) for itself. Workers goroutines (the caller is
// one) claim chunks from a shared counter and each carries a whole chunk
// from end to end:
//
//	CopyHtoD: take the slot put back longest ago, wait for that slot's
//	          previous DMA (its event), copy src -> slot, issue the DMA on
//	          the stream, record the slot's event, put the slot back.
//	CopyDtoH: take a slot, issue the DMA into it, record its event (up to
//	          InFlight/Workers such DMAs queued per worker); wait for the
//	          oldest one's event, copy slot -> dst, put the slot back.
//
// There is no barrier per chunk: a worker that finishes its chunk claims the
// next while the others copy theirs, and the DMAs they issue queue on the
// stream behind one another. The order in which they reach the stream is
// not the chunks' order, which is harmless: every DMA has its own device
// range, each slot's reuse waits for that slot's own event, and the call's
// last DMAs are all queued before it returns, so work queued on the stream
// after the call sees every chunk.
//
// Each call owns its slots, events and workers: nothing is shared between
// concurrent calls but the Source (the MUSA plugin this replaces kept one
// job slot per stager and corrupted data when two copies ran at once). When
// a call ends, its slots go back to the Source with RecordStream, so a slot
// whose DMA is still queued is not handed out again before the DMA has run;
// CopyHtoD therefore returns as soon as src has been read, without waiting
// for the last DMAs.
//
// The workers are started per call and joined before it returns: starting
// them costs what waking parked ones does (W=2: 0.63-0.83 us per call
// against 0.60-0.76 us, W=4: 1.26-1.88 against 1.19-1.52 us on the
// developer machine), under 1% of a 1 MiB copy, and per-call workers need
// no Close, leave no goroutine behind a call, and cannot mix two calls'
// chunks.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/driver"
)

// The defaults come from BenchmarkStagerGrid (ChunkSize x InFlight x
// Workers, both directions, 16, 64 and 256 MiB, each cell against the
// memmove bound measured beside it; see bench_test.go), run on the
// developer machine: a 2-vCPU AMD EPYC VM ("Oxide Virtual Turin-like",
// GOMAXPROCS 2) shared with other jobs, Go 1.26.8, sim. Each figure is the
// worst of the six cases' staged/bound (medians of 2 runs):
//
//	InFlight 8:                      Workers 3:
//	chunk   W=1  W=2  W=3  W=4       chunk   slots=4  slots=8  slots=16
//	128KiB  0.46 0.56 0.65 0.68      128KiB  0.61     0.65     0.49
//	256KiB  0.55 0.52 0.55 0.60      256KiB  0.66     0.55     0.55
//	512KiB  0.74 0.58 0.68 0.63      512KiB  0.55     0.68     0.68
//	1MiB    0.77 0.92 0.94 0.89      1MiB    0.97     0.94     0.90
//	2MiB    0.84 0.89 0.92 0.89      2MiB    1.00     0.92     0.88
//	4MiB    0.82 0.88 0.90 0.84      4MiB    0.87     0.90     0.82
//
// (the whole grid is in the README). Chunks below 1 MiB fall behind at 64
// and 256 MiB, though not for their fixed costs (a 4 MiB copy in 128 KiB
// chunks stages as fast as in 1 MiB ones: 7.2 against 65 us a chunk, 3
// workers); one worker leaves a core idle while the stream's goroutine runs
// a DMA; 1 and 2 MiB with 3 or 4 workers and 4 to 8 slots are within the
// noise of each other (0.05 between runs), and an earlier run ranked 1 MiB,
// 8 slots, 3 workers first (0.97 worst case).
const (
	// defaultChunkSize: the grid's best, and small enough that on a GPU
	// the first DMA starts early; per-chunk costs there (an event record
	// and a DMA launch, about 1 us each) stay near 5% of the chunk's copy
	// time (1 MiB at 50 GB/s is 21 us).
	defaultChunkSize = 1 << 20

	// maxDefaultWorkers caps the default number of workers: memcpy on the
	// H100 host peaks near 8 threads (30 GB/s) and falls with 16.
	maxDefaultWorkers = 8

	// defaultDirectThreshold: below it staging cannot pay off (the driver's
	// pageable copy of 64 KiB is a few microseconds), so the driver's
	// synchronous copy is used directly.
	defaultDirectThreshold = 64 << 10

	// defaultInFlight slots per call: at least as many as the default
	// workers on any host (a call uses no more workers than slots), and
	// among the grid's best with 3 workers.
	defaultInFlight = 8
	minInFlight     = 2

	// partAlign keeps slots on cache-line boundaries.
	partAlign = 64
)

// StagerOptions configures a Stager. The zero value gives the defaults; a
// value out of range is an error from NewStager naming the field.
type StagerOptions struct {
	// ChunkSize is the most bytes one DMA of a staged copy moves: a copy is
	// split into chunks of ChunkSize (the last may be shorter). 0 means
	// 1 MiB; negative is an error.
	ChunkSize int
	// Workers is how many goroutines of one call copy chunks at once, the
	// calling goroutine among them; each carries whole chunks (host copy,
	// DMA, event). A call uses at most InFlight workers, and no more than it
	// has chunks. 0 means GOMAXPROCS+1, at most 8; negative is an error.
	Workers int
	// DirectThreshold: copies shorter than it use the driver's synchronous
	// copies directly, after waiting for the stream. 0 means 64 KiB; a
	// negative value stages every copy.
	DirectThreshold int
	// InFlight is the number of pinned slots (of ChunkSize each) one call
	// holds, and so the most chunks it has in flight: at least 2. 0 means
	// 8; 1 and negative are errors.
	InFlight int
}

// withDefaults returns o with every zero field set to its default, or an
// error naming the first field out of range.
func (o StagerOptions) withDefaults() (StagerOptions, error) {
	switch {
	case o.ChunkSize == 0:
		o.ChunkSize = defaultChunkSize
	case o.ChunkSize < 0:
		return o, fmt.Errorf("hostpin: StagerOptions.ChunkSize %d: want > 0 bytes (0 for %d MiB): %w", o.ChunkSize, defaultChunkSize>>20, driver.ErrInvalidValue)
	}
	switch {
	case o.Workers == 0:
		// One more worker than cores: a worker waiting for its slot's DMA
		// leaves its core to another (W=3 over W=2 in the grid).
		o.Workers = min(runtime.GOMAXPROCS(0)+1, maxDefaultWorkers)
	case o.Workers < 0:
		return o, fmt.Errorf("hostpin: StagerOptions.Workers %d: want >= 1 (0 for GOMAXPROCS+1, at most %d): %w", o.Workers, maxDefaultWorkers, driver.ErrInvalidValue)
	}
	if o.DirectThreshold == 0 {
		o.DirectThreshold = defaultDirectThreshold
	}
	switch {
	case o.InFlight == 0:
		o.InFlight = defaultInFlight
	case o.InFlight < minInFlight:
		return o, fmt.Errorf("hostpin: StagerOptions.InFlight %d: want >= %d chunks (0 for %d): %w", o.InFlight, minInFlight, defaultInFlight, driver.ErrInvalidValue)
	}
	return o, nil
}

// Source is the pinned memory a Stager copies through: an *Allocator, or a
// *Direct to measure the Stager against uncached driver allocations. The
// events that mark each chunk's transfers come from the event pool of the
// allocator that handed out the chunk (a Buffer knows it), so a Source that
// wraps one of those works too.
type Source interface {
	Device() driver.Device
	Alloc(size int) (*Buffer, error)
	RecordStream(b *Buffer, s driver.Stream) error
	Free(b *Buffer) error
}

// Stager copies between pageable Go memory and device memory through pinned
// chunks of a Source.
//
// A Stager is safe for concurrent use by multiple goroutines: any number
// may copy at once, to any streams. It holds no resource between calls,
// so it has no Close.
type Stager struct {
	// Locking: src, dev and opts are set by NewStager and never change; regs,
	// the registrations made through Register, has its own lock, held only to
	// look a slice up or to add or remove a registration. Any number of goroutines may copy at
	// once, to any streams; every call keeps its own job (slots, events,
	// workers, its first error; see job for how its workers share it), and the
	// Source serialises what the calls share. A Stager holds no resource
	// between calls (a call's workers and slots end with it), so it has no
	// Close.

	src  Source
	dev  driver.Device
	opts StagerOptions // defaults filled in
	regs registry      // live registrations (registered.go); own lock
}

// NewStager returns a Stager that takes its chunks from src.
func NewStager(src Source, opts StagerOptions) (*Stager, error) {
	if src == nil {
		return nil, fmt.Errorf("hostpin: NewStager with a nil Source: want an *Allocator or a *Direct: %w", driver.ErrInvalidValue)
	}
	dev := src.Device()
	if dev == nil {
		return nil, fmt.Errorf("hostpin: NewStager: the Source has no device: %w", driver.ErrInvalidValue)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Stager{src: src, dev: dev, opts: opts}, nil
}

// Options returns the options in effect, defaults filled in.
func (s *Stager) Options() StagerOptions { return s.opts }

// CopyHtoD copies src to device memory at dst, ordered on st (nil: the
// device's default stream) after the work already queued there. It returns
// once src may be reused; the last DMAs
// may still be queued on st (later work on st sees their result). A src
// inside a registration (Register) is copied by one DMA, waited for. On
// cancellation it issues no further chunks, waits for those in flight and
// returns ctx.Err(); driver errors are returned wrapped.
func (s *Stager) CopyHtoD(ctx context.Context, dst driver.Ptr, src []byte, st driver.Stream) error {
	st = driver.StreamOr(s.dev, st)
	if err := ctx.Err(); err != nil || len(src) == 0 {
		return err
	}
	if r := s.regs.find(src); r != nil {
		if ok, err := s.viaRegistered(r, st, "copy to device", func() error { return s.dev.CopyHtoD(dst, src, st) }); ok {
			return err
		}
	}
	if len(src) < s.opts.DirectThreshold {
		if err := st.Synchronize(); err != nil {
			return fmt.Errorf("hostpin: copy to device: waiting for the stream: %w", err)
		}
		if err := s.dev.CopyHtoDSync(dst, src); err != nil {
			return fmt.Errorf("hostpin: copy to device: %w", err)
		}
		return nil
	}
	return s.run(ctx, len(src), st, func(j *job) { j.toDevice(dst, src) })
}

// CopyDtoH copies device memory at src into dst, ordered on st (nil: the
// device's default stream) after the work already queued there, and returns
// once dst is filled. A dst inside a registration (Register) is filled by
// one DMA. On
// cancellation it issues no further chunks, waits for those in flight and
// returns ctx.Err() (dst is then partly written); driver errors are
// returned wrapped.
func (s *Stager) CopyDtoH(ctx context.Context, dst []byte, src driver.Ptr, st driver.Stream) error {
	st = driver.StreamOr(s.dev, st)
	if err := ctx.Err(); err != nil || len(dst) == 0 {
		return err
	}
	if r := s.regs.find(dst); r != nil {
		if ok, err := s.viaRegistered(r, st, "copy to host", func() error { return s.dev.CopyDtoH(dst, src, st) }); ok {
			return err
		}
	}
	if len(dst) < s.opts.DirectThreshold {
		if err := st.Synchronize(); err != nil {
			return fmt.Errorf("hostpin: copy to host: waiting for the stream: %w", err)
		}
		if err := s.dev.CopyDtoHSync(dst, src); err != nil {
			return fmt.Errorf("hostpin: copy to host: %w", err)
		}
		return nil
	}
	return s.run(ctx, len(dst), st, func(j *job) { j.toHost(dst, src) })
}

// run stages one call of n bytes on st: it sets up the call's job, runs
// work on the job's workers (the calling goroutine is one, the others are
// started here and joined before run returns, so no goroutine outlives the
// call), and ends the job with the first error any worker met.
func (s *Stager) run(ctx context.Context, n int, st driver.Stream, work func(j *job)) error {
	j, err := s.newJob(ctx, n, st)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for w := 1; w < j.workers; w++ {
		wg.Go(func() { work(j) })
	}
	work(j)
	wg.Wait()
	return j.finish(j.err)
}

// job is one call's state: its pinned slots and their events, the next
// chunk to claim and the first error. It is never shared between calls.
//
// Locking: the fields above free are set by newJob and never change while
// workers run. A slot belongs to the worker that took it from free until it
// puts it back, so no lock guards a slot; finish, after every worker has
// returned, reads them all. next, failed and untracked are atomics any
// worker touches; mu guards err while workers run (run reads it after
// joining them), and nothing is called under it.
type job struct {
	s       *Stager
	ctx     context.Context
	st      driver.Stream
	n       int
	chunk   int // bytes per chunk (the last may be shorter)
	chunks  int
	workers int
	buf     *Buffer // every slot's memory, one stride each
	slots   []slot

	// free holds the slots no worker holds, oldest put back first: a
	// CopyHtoD worker takes one per chunk (waiting for its last DMA there),
	// a CopyDtoH worker up to perWorker.
	free      chan *slot
	next      atomic.Int64 // the next chunk to claim
	failed    atomic.Bool  // a worker failed: the others claim no more chunks
	untracked atomic.Bool  // a DMA was issued but its event not recorded

	mu  sync.Mutex
	err error // the first failure
}

// slot is one pinned chunk and the event marking its last DMA. Only the
// worker holding it (taken from job.free) touches it (see job).
type slot struct {
	mem  []byte
	ev   driver.Event
	busy bool // ev marks a DMA not yet waited for
}

func (sl *slot) wait() error {
	if !sl.busy {
		return nil
	}
	sl.busy = false
	if err := sl.ev.Synchronize(); err != nil {
		return fmt.Errorf("hostpin: staged copy: %w", err)
	}
	return nil
}

// record marks the DMA just issued from the slot. If the mark cannot be
// recorded the DMA is untracked, and finish waits for the whole stream.
func (sl *slot) record(j *job) error {
	if err := sl.ev.Record(j.st); err != nil {
		j.untracked.Store(true)
		return fmt.Errorf("hostpin: staged copy: recording chunk event: %w", err)
	}
	sl.busy = true
	return nil
}

// newJob sizes a call of n bytes (chunks, slots, workers) and takes its
// pinned memory, one Buffer for all slots, and an event per slot.
func (s *Stager) newJob(ctx context.Context, n int, st driver.Stream) (*job, error) {
	chunk := min(s.opts.ChunkSize, n)
	chunks := (n + chunk - 1) / chunk
	nslots := min(s.opts.InFlight, chunks)
	j := &job{
		s: s, ctx: ctx, st: st, n: n, chunk: chunk, chunks: chunks,
		workers: min(s.opts.Workers, nslots),
		slots:   make([]slot, nslots),
		free:    make(chan *slot, nslots),
	}
	// Slots start on cache-line boundaries, so two workers never write one line.
	stride := roundUp(chunk, partAlign)
	size := nslots * stride
	buf, err := s.src.Alloc(size)
	if err != nil {
		return nil, fmt.Errorf("hostpin: staged copy: %w", err)
	}
	j.buf = buf
	if buf == nil || buf.c == nil || buf.Len() != size {
		return nil, j.finish(fmt.Errorf("hostpin: staged copy: the Source handed out no %d-byte Buffer of an Allocator or Direct: %w", size, driver.ErrInvalidValue))
	}
	mem := buf.Bytes()
	for i := range j.slots {
		j.slots[i].mem = mem[i*stride : i*stride+chunk : i*stride+chunk]
		ev, err := buf.c.events.Get()
		if err != nil {
			return nil, j.finish(fmt.Errorf("hostpin: staged copy: event: %w", err))
		}
		j.slots[i].ev = ev
		j.free <- &j.slots[i]
	}
	return j, nil
}

// claim hands the calling worker the next chunk, or false when there is
// none left, another worker failed, or the context is done (which it
// records as the call's error).
func (j *job) claim() (int, bool) {
	if j.failed.Load() {
		return 0, false
	}
	i := int(j.next.Add(1) - 1)
	if i >= j.chunks {
		return 0, false
	}
	if err := j.ctx.Err(); err != nil {
		j.fail(err)
		return 0, false
	}
	return i, true
}

// fail records err as the call's error if it is the first, and stops the
// other workers claiming chunks.
func (j *job) fail(err error) {
	j.mu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.mu.Unlock()
	j.failed.Store(true)
}

// span is the offset and length of chunk i.
func (j *job) span(i int) (off, n int) {
	off = i * j.chunk
	return off, min(j.chunk, j.n-off)
}

// toDevice is a worker of a CopyHtoD: for each chunk it claims, it takes
// the slot put back longest ago, waits for that slot's previous DMA,
// copies the chunk in, issues the DMA on the stream, records the slot's
// event and puts the slot back. DMAs of different workers reach the stream
// in no particular order: each writes its own device range, and a slot is
// reused only after its own event. A worker holds one slot at a time and
// there are at least as many slots as workers, so taking one never waits
// for another worker, and a call of no more chunks than slots never waits
// for a DMA.
func (j *job) toDevice(dst driver.Ptr, src []byte) {
	for {
		i, ok := j.claim()
		if !ok {
			return
		}
		sl := <-j.free
		err := sl.wait()
		if err == nil {
			off, m := j.span(i)
			pinned := sl.mem[:m]
			copy(pinned, src[off:off+m])
			if err = j.s.dev.CopyHtoD(dst+driver.Ptr(off), pinned, j.st); err != nil {
				err = fmt.Errorf("hostpin: copy to device, chunk at %d: %w", off, err)
			} else {
				err = sl.record(j)
			}
		}
		j.free <- sl
		if err != nil {
			j.fail(err)
			return
		}
	}
}

// toHost is a worker of a CopyDtoH: it keeps up to perWorker DMAs queued,
// each into a slot it holds, and copies out the oldest once its event has
// completed, then puts that slot back; its next DMAs run meanwhile.
// perWorker is the slots divided by the workers, rounded up, so together
// the workers keep every slot busy. A worker holding a slot never waits for
// another (it takes more only if one is free); one holding none waits for
// a slot, which a holder puts back after its next copy-out, or when it
// stops. A worker that stops puts back every slot it holds, so none is
// waited for in vain.
func (j *job) toHost(dst []byte, src driver.Ptr) {
	perWorker := (len(j.slots) + j.workers - 1) / j.workers
	type held struct {
		sl    *slot
		chunk int
	}
	ring := make([]held, perWorker) // ring[k%perWorker] for k in [done, issued)
	issued, done := 0, 0
	defer func() {
		for ; done < issued; done++ {
			j.free <- ring[done%perWorker].sl
		}
	}()
	for {
		for issued-done < perWorker {
			var sl *slot
			if issued == done {
				sl = <-j.free
			} else {
				select {
				case sl = <-j.free:
				default:
				}
			}
			if sl == nil {
				break
			}
			i, ok := j.claim()
			if !ok {
				j.free <- sl
				break
			}
			off, m := j.span(i)
			if err := j.s.dev.CopyDtoH(sl.mem[:m], src+driver.Ptr(off), j.st); err != nil {
				j.free <- sl
				j.fail(fmt.Errorf("hostpin: copy to host, chunk at %d: %w", off, err))
				return
			}
			err := sl.record(j)
			ring[issued%perWorker] = held{sl, i}
			issued++
			if err != nil {
				j.fail(err)
				return
			}
		}
		if done == issued || j.failed.Load() {
			return
		}
		h := ring[done%perWorker]
		if err := h.sl.wait(); err != nil {
			j.fail(err)
			return
		}
		off, m := j.span(h.chunk)
		copy(dst[off:off+m], h.sl.mem[:m])
		j.free <- h.sl
		done++
	}
}

// finish ends the call: on failure it first waits for the chunks in flight
// (so a failed call leaves no DMA behind it to land later; a DMA whose event
// could not be recorded is waited for through the stream); then it returns
// the slots' memory to the Source with RecordStream (a chunk still queued is
// not reused before its DMA) and every event to its pool. A Buffer whose
// Free is refused with evpool.ErrNotReleased (nothing can show its stream's
// work over: a lost device) stays in use, as the policy wants, and the error
// is returned: the call has no later moment to free it again.
func (j *job) finish(err error) error {
	errs := []error{err}
	if err != nil {
		quiet := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		for i := range j.slots {
			if e := j.slots[i].wait(); e != nil && !quiet {
				errs = append(errs, e)
			}
		}
		if j.untracked.Load() {
			if e := j.st.Synchronize(); e != nil && !quiet {
				errs = append(errs, fmt.Errorf("hostpin: staged copy: waiting for the stream: %w", e))
			}
		}
	}
	if j.buf != nil {
		if e := j.s.src.RecordStream(j.buf, j.st); e != nil {
			errs = append(errs, e)
		}
		if e := j.s.src.Free(j.buf); e != nil {
			errs = append(errs, e)
		}
	}
	for i := range j.slots {
		if ev := j.slots[i].ev; ev != nil {
			j.buf.c.events.Put(ev)
		}
	}
	if err != nil && len(errs) == 1 {
		return err // keep ctx.Err() itself, comparable with ==
	}
	return errors.Join(errs...)
}
