package hostpin

// Design of the Stager.
//
// Pageable Go memory cannot be the source or target of an asynchronous copy
// (the GC may move or free it before the copy runs, and the driver's own
// pageable path runs at 7 GB/s on an H100 machine against 55 GB/s pinned),
// so a copy goes through pinned chunks from a Source (an Allocator, or a
// Direct for A/B runs):
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
// the Source (the MUSA plugin this replaces kept one job slot per stager
// and corrupted data when two copies ran at once). When a call ends its
// chunks go back to the Source with RecordStream, so a chunk whose DMA
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

// StagerOptions configures a Stager. The zero value gives the defaults; a
// value out of range is an error from NewStager naming the field.
type StagerOptions struct {
	// ChunkSize is the pinned chunk a copy is split into. 0 means 4 MiB;
	// negative is an error.
	ChunkSize int
	// Workers is how many goroutines share the host copy of one chunk. 0
	// means GOMAXPROCS, at most 8; negative is an error.
	Workers int
	// DirectThreshold: copies shorter than it use the driver's synchronous
	// copies directly, after waiting for the stream. 0 means 64 KiB; a
	// negative value stages every copy.
	DirectThreshold int
	// InFlight is the number of chunks one call keeps in flight: at least 2.
	// 0 means 3; 1 and negative are errors.
	InFlight int
}

// withDefaults returns o with every zero field set to its default, or an
// error naming the first field out of range.
func (o StagerOptions) withDefaults() (StagerOptions, error) {
	switch {
	case o.ChunkSize == 0:
		o.ChunkSize = defaultChunkSize
	case o.ChunkSize < 0:
		return o, fmt.Errorf("hostpin: StagerOptions.ChunkSize %d: want > 0 bytes (0 for 4 MiB): %w", o.ChunkSize, driver.ErrInvalidValue)
	}
	switch {
	case o.Workers == 0:
		o.Workers = min(runtime.GOMAXPROCS(0), maxDefaultWorkers)
	case o.Workers < 0:
		return o, fmt.Errorf("hostpin: StagerOptions.Workers %d: want >= 1 (0 for GOMAXPROCS, at most %d): %w", o.Workers, maxDefaultWorkers, driver.ErrInvalidValue)
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
// A Stager is safe for concurrent use: any number of goroutines may copy at
// once, to any streams. It holds no mutable state of its own (every call
// keeps its own job state), so it has no lock; its Source serialises what
// the calls share.
type Stager struct {
	src  Source
	dev  driver.Device
	opts StagerOptions // defaults filled in
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
// may still be queued on st (later work on st sees their result). On
// cancellation it issues no further chunks, waits for those in flight and
// returns ctx.Err(); driver errors are returned wrapped.
func (s *Stager) CopyHtoD(ctx context.Context, dst driver.Ptr, src []byte, st driver.Stream) error {
	st = driver.StreamOr(s.dev, st)
	if err := ctx.Err(); err != nil || len(src) == 0 {
		return err
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

// CopyDtoH copies device memory at src into dst, ordered on st (nil: the
// device's default stream) after the work already queued there, and returns
// once dst is filled. On
// cancellation it issues no further chunks, waits for those in flight and
// returns ctx.Err() (dst is then partly written); driver errors are
// returned wrapped.
func (s *Stager) CopyDtoH(ctx context.Context, dst []byte, src driver.Ptr, st driver.Stream) error {
	st = driver.StreamOr(s.dev, st)
	if err := ctx.Err(); err != nil || len(dst) == 0 {
		return err
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
	chunk := min(s.opts.ChunkSize, n)
	chunks := (n + chunk - 1) / chunk
	j := &job{s: s, st: st, n: n, chunk: chunk, chunks: chunks, slots: make([]slot, min(s.opts.InFlight, chunks))}
	for i := range j.slots {
		buf, err := s.src.Alloc(chunk)
		if err != nil {
			return nil, j.finish(fmt.Errorf("hostpin: staged copy: %w", err))
		}
		j.slots[i].buf = buf
		if buf == nil || buf.c == nil || buf.Len() != chunk {
			return nil, j.finish(fmt.Errorf("hostpin: staged copy: the Source handed out no %d-byte Buffer of an Allocator or Direct: %w", chunk, driver.ErrInvalidValue))
		}
		ev, err := buf.c.events.Get()
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
// could not be recorded is waited for through the stream); then it returns
// every chunk to the Source with RecordStream (a chunk still queued is not
// reused before its DMA) and every event to its pool. A chunk whose Free is
// refused with evpool.ErrNotReleased (nothing can show its stream's work
// over: a lost device) stays in use, as the policy wants, and the error is
// returned: the call has no later moment to free it again.
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
			if e := j.s.src.RecordStream(sl.buf, j.st); e != nil {
				errs = append(errs, e)
			}
			if e := j.s.src.Free(sl.buf); e != nil {
				errs = append(errs, e)
			}
		}
		if sl.ev != nil {
			sl.buf.c.events.Put(sl.ev)
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
	parts := min(s.opts.Workers, n/minPart)
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
