package hostpin

// Design of the Stager.
//
// Pageable Go memory cannot be the source or target of an asynchronous copy
// (the GC may move or free it before the copy runs, and the driver's own
// pageable path runs at 7 GB/s on an H100 machine against 55 GB/s pinned),
// so a copy goes through pinned chunks from the Allocator:
//
//	CopyHtoD: for each chunk: wait until its slot's previous DMA is done,
//	          host copy src -> pinned (split over workers), issue the DMA
//	          on the stream, record the slot's event.
//	CopyDtoH: issue the DMAs of the first slots; for each chunk: wait for
//	          its event, host copy pinned -> dst, issue the DMA of the chunk
//	          that reuses the slot.
//
// With inFlight slots the host copy of chunk i+1 overlaps the DMA of chunk i
// (and of the chunks before it still queued). Each call owns its slots,
// events and wait groups: nothing is shared between concurrent calls but
// the allocator (the MUSA plugin this replaces kept one job slot per stager
// and corrupted data when two copies ran at once). When a call ends its
// chunks go back to the allocator with RecordStream, so a chunk whose DMA
// is still queued is not handed out again before the DMA has run; CopyHtoD
// therefore returns as soon as src has been read, without waiting for the
// last DMAs.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/accelkit/accelkit/driver"
)

const (
	// defaultChunkSize: large enough that per-chunk costs (an event record,
	// a DMA launch, about 1 us each on CUDA) are far below the chunk's copy
	// time (4 MiB at 50 GB/s is 84 us), small enough that the first DMA
	// starts early and a call holds little pinned memory.
	defaultChunkSize = 4 << 20

	// maxDefaultWorkers caps the default host-copy parallelism: memcpy on
	// the H100 host peaks near 8 threads (30 GB/s) and falls with 16.
	maxDefaultWorkers = 8

	// defaultDirectThreshold: below it staging cannot pay off (the driver's
	// pageable copy of 64 KiB is a few microseconds), so the driver's
	// synchronous copy is used directly.
	defaultDirectThreshold = 64 << 10

	// defaultInFlight chunks per call: two keep one DMA running while the
	// next chunk is filled; a third absorbs jitter between the two sides.
	defaultInFlight = 3
	minInFlight     = 2

	// minPart is the smallest piece of a chunk given to a worker: below it
	// handing the piece to another goroutine (about 1 us) costs more than
	// copying it.
	minPart = 256 << 10
	// partAlign keeps worker pieces on cache-line boundaries.
	partAlign = 64
)

// StagerOptions configures a Stager. The zero value gives the defaults.
type StagerOptions struct {
	// ChunkSize is the pinned chunk a copy is split into. 0 (or negative)
	// means 4 MiB.
	ChunkSize int
	// Workers is how many goroutines share the host copy of one chunk. 0 (or
	// negative) means GOMAXPROCS, at most 8.
	Workers int
	// DirectThreshold: copies shorter than it use the driver's synchronous
	// copies directly, after waiting for the stream. 0 means 64 KiB; a
	// negative value stages every copy.
	DirectThreshold int
	// InFlight is the number of chunks one call keeps in flight, at least 2.
	// 0 (or less) means 3.
	InFlight int
}

// Stager copies between pageable Go memory and device memory through pinned
// chunks of an Allocator.
//
// A Stager is safe for concurrent use: any number of goroutines may copy at
// once, to any streams. It holds no mutable state of its own (every call
// keeps its own job state), so it needs no lock; the allocator it uses
// serialises what it shares.
type Stager struct {
	a        *Allocator
	dev      driver.Device
	chunk    int
	workers  int
	direct   int
	inFlight int
}

// NewStager returns a Stager that takes its chunks from a.
func NewStager(a *Allocator, opts StagerOptions) *Stager {
	s := &Stager{a: a, dev: a.dev, chunk: opts.ChunkSize, workers: opts.Workers, direct: opts.DirectThreshold, inFlight: opts.InFlight}
	if s.chunk <= 0 {
		s.chunk = defaultChunkSize
	}
	if s.workers <= 0 {
		s.workers = min(runtime.GOMAXPROCS(0), maxDefaultWorkers)
	}
	if s.direct == 0 {
		s.direct = defaultDirectThreshold
	}
	if s.inFlight <= 0 {
		s.inFlight = defaultInFlight
	}
	s.inFlight = max(s.inFlight, minInFlight)
	return s
}

// Options returns the options in effect, defaults filled in.
func (s *Stager) Options() StagerOptions {
	return StagerOptions{ChunkSize: s.chunk, Workers: s.workers, DirectThreshold: s.direct, InFlight: s.inFlight}
}

// CopyHtoD copies src to device memory at dst, ordered on st after the work
// already queued there. It returns once src may be reused; the last DMAs
// may still be queued on st (later work on st sees their result). On
// cancellation it issues no further chunks, waits for those in flight and
// returns ctx.Err(); driver errors are returned wrapped.
func (s *Stager) CopyHtoD(ctx context.Context, dst driver.Ptr, src []byte, st driver.Stream) error {
	if err := s.checkArgs(ctx, st); err != nil || len(src) == 0 {
		return err
	}
	if len(src) < s.direct {
		if err := st.Synchronize(); err != nil {
			return fmt.Errorf("hostpin: copy to device: waiting for the stream: %w", err)
		}
		if err := s.dev.CopyHtoDSync(dst, src); err != nil {
			return fmt.Errorf("hostpin: copy to device: %w", err)
		}
		return nil
	}
	j, err := s.newJob(len(src), st)
	if err != nil {
		return err
	}
	for i := range j.chunks {
		if err = ctx.Err(); err != nil {
			break
		}
		sl := j.slot(i)
		if err = sl.wait(); err != nil {
			break
		}
		off, m := j.span(i)
		pinned := sl.buf.Bytes()[:m]
		s.hostCopy(pinned, src[off:off+m])
		if err = s.dev.CopyHtoD(dst+driver.Ptr(off), pinned, st); err != nil {
			err = fmt.Errorf("hostpin: copy to device, chunk at %d: %w", off, err)
			break
		}
		if err = sl.record(j); err != nil {
			break
		}
	}
	return j.finish(err)
}

// CopyDtoH copies device memory at src into dst, ordered on st after the
// work already queued there, and returns once dst is filled. On
// cancellation it issues no further chunks, waits for those in flight and
// returns ctx.Err() (dst is then partly written); driver errors are
// returned wrapped.
func (s *Stager) CopyDtoH(ctx context.Context, dst []byte, src driver.Ptr, st driver.Stream) error {
	if err := s.checkArgs(ctx, st); err != nil || len(dst) == 0 {
		return err
	}
	if len(dst) < s.direct {
		if err := st.Synchronize(); err != nil {
			return fmt.Errorf("hostpin: copy to host: waiting for the stream: %w", err)
		}
		if err := s.dev.CopyDtoHSync(dst, src); err != nil {
			return fmt.Errorf("hostpin: copy to host: %w", err)
		}
		return nil
	}
	j, err := s.newJob(len(dst), st)
	if err != nil {
		return err
	}
	issued := 0
	issue := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		off, m := j.span(issued)
		sl := j.slot(issued)
		if err := s.dev.CopyDtoH(sl.buf.Bytes()[:m], src+driver.Ptr(off), st); err != nil {
			return fmt.Errorf("hostpin: copy to host, chunk at %d: %w", off, err)
		}
		issued++
		return sl.record(j)
	}
	for issued < len(j.slots) && err == nil {
		err = issue()
	}
	for i := 0; i < j.chunks && err == nil; i++ {
		sl := j.slot(i)
		if err = sl.wait(); err != nil {
			break
		}
		off, m := j.span(i)
		s.hostCopy(dst[off:off+m], sl.buf.Bytes()[:m])
		if issued < j.chunks {
			err = issue()
		}
	}
	return j.finish(err)
}

func (s *Stager) checkArgs(ctx context.Context, st driver.Stream) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("hostpin: nil stream: %w", driver.ErrInvalidValue)
	}
	return nil
}

// job is one call's state: its pinned chunks and their events. It is never
// shared between calls.
type job struct {
	s      *Stager
	st     driver.Stream
	n      int
	chunk  int
	chunks int
	slots  []slot
	// untracked: a DMA was issued but its event not recorded.
	untracked bool
}

// slot is one pinned chunk and the event marking its last DMA.
type slot struct {
	buf  *Buffer
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
		j.untracked = true
		return fmt.Errorf("hostpin: staged copy: recording chunk event: %w", err)
	}
	sl.busy = true
	return nil
}

func (s *Stager) newJob(n int, st driver.Stream) (*job, error) {
	chunk := min(s.chunk, n)
	chunks := (n + chunk - 1) / chunk
	j := &job{s: s, st: st, n: n, chunk: chunk, chunks: chunks, slots: make([]slot, min(s.inFlight, chunks))}
	for i := range j.slots {
		buf, err := s.a.Alloc(chunk)
		if err != nil {
			return nil, j.finish(fmt.Errorf("hostpin: staged copy: %w", err))
		}
		j.slots[i].buf = buf
		ev, err := s.a.events.Get()
		if err != nil {
			return nil, j.finish(fmt.Errorf("hostpin: staged copy: event: %w", err))
		}
		j.slots[i].ev = ev
	}
	return j, nil
}

func (j *job) slot(i int) *slot { return &j.slots[i%len(j.slots)] }

// span is the offset and length of chunk i.
func (j *job) span(i int) (off, n int) {
	off = i * j.chunk
	return off, min(j.chunk, j.n-off)
}

// finish ends the call: on failure it first waits for the chunks in flight
// (so a failed call leaves no DMA behind it to land later; a DMA whose event
// could not be recorded is waited for through the stream); then it returns every chunk to
// the allocator with RecordStream (a chunk still queued is not reused before
// its DMA) and every event to the pool.
func (j *job) finish(err error) error {
	errs := []error{err}
	if err != nil {
		quiet := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		for i := range j.slots {
			if e := j.slots[i].wait(); e != nil && !quiet {
				errs = append(errs, e)
			}
		}
		if j.untracked {
			if e := j.st.Synchronize(); e != nil && !quiet {
				errs = append(errs, fmt.Errorf("hostpin: staged copy: waiting for the stream: %w", e))
			}
		}
	}
	for i := range j.slots {
		sl := &j.slots[i]
		if sl.buf != nil {
			if e := j.s.a.RecordStream(sl.buf, j.st); e != nil {
				errs = append(errs, e)
			}
			if e := j.s.a.Free(sl.buf); e != nil {
				errs = append(errs, e)
			}
		}
		if sl.ev != nil {
			j.s.a.events.Put(sl.ev)
		}
	}
	if err != nil && len(errs) == 1 {
		return err // keep ctx.Err() itself, comparable with ==
	}
	return errors.Join(errs...)
}

// hostCopy copies src into dst (equal lengths), split over the Stager's
// workers when the pieces are large enough to pay for the hand-off. The
// calling goroutine copies the first piece itself; the wait group is local
// to the call.
func (s *Stager) hostCopy(dst, src []byte) {
	n := len(src)
	parts := min(s.workers, n/minPart)
	if parts <= 1 {
		copy(dst, src)
		return
	}
	per := roundUp((n+parts-1)/parts, partAlign)
	var wg sync.WaitGroup
	for off := per; off < n; off += per {
		end := min(off+per, n)
		wg.Go(func() { copy(dst[off:end], src[off:end]) })
	}
	copy(dst[:per], src[:per])
	wg.Wait()
}
