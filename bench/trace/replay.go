package trace

import (
	"errors"
	"fmt"
	"time"
)

// Allocator is what a trace replays through: devalloc's allocator, its
// passthrough backend, or anything with the same two methods. Streams are
// the replayer's keys; an allocator that ignores them may.
type Allocator interface {
	Alloc(size uint64, stream uint64) (ptr uint64, err error)
	Free(ptr uint64) error
}

// StreamIdler is an Allocator that wants to know when a stream has no live
// allocation left in the replay, so that it can let go of what it keeps
// per stream (a driver stream per trace stream id, say). Replay calls
// StreamIdle after the Free that leaves the stream with nothing live; a
// later Alloc on the stream may follow.
type StreamIdler interface {
	StreamIdle(stream uint64)
}

// Result is what one replay did.
type Result struct {
	Allocs, Frees int
	// Failed counts allocations the allocator refused; the trace goes on
	// (later frees of those pointers are skipped, SkippedFrees), as an
	// application that handles OOM would.
	Failed       int
	SkippedFrees int
	// TraceFailures counts "allocate failure" lines: the traced
	// allocator's own refusals, replayed as nothing.
	TraceFailures int
	// UnknownFrees counts frees of pointers the trace never allocated
	// (logs that start mid-run), skipped.
	UnknownFrees int
	// NullAllocs counts "allocate" lines with a null pointer: zero-byte
	// requests, which hold nothing and are replayed as nothing (as are
	// frees of the null pointer).
	NullAllocs int
	Elapsed    time.Duration
	FirstErr   error // the first allocation error, for the report
}

// liveAlloc is a trace pointer live in the replay: our pointer and its
// stream's state.
type liveAlloc struct {
	ptr uint64
	st  *streamLive
}

// streamLive counts a stream's live allocations; it exists only while the
// count is above zero, so the replay's memory follows the live state, not
// the streams the trace ever named.
type streamLive struct {
	id   uint64
	live int
}

// Replay runs events through a, timing the whole run. Allocation errors are
// counted, not fatal; a Free error is fatal (the allocator rejected a
// pointer it handed out), and so is an allocation of a pointer the trace
// has live already (a *LineError: the trace is inconsistent). If a is a
// StreamIdler it hears of each stream left with nothing live, after a
// free or after an allocation on it failed.
func Replay(events []Event, a Allocator) (Result, error) {
	var res Result
	idler, _ := a.(StreamIdler)
	live := make(map[uint64]liveAlloc, 1024) // trace pointer -> ours
	failed := make(map[uint64]struct{})      // trace pointers whose allocation failed here
	streams := make(map[uint64]*streamLive)
	release := func(l liveAlloc) error {
		err := a.Free(l.ptr)
		if l.st.live--; l.st.live == 0 {
			delete(streams, l.st.id)
			if idler != nil {
				idler.StreamIdle(l.st.id)
			}
		}
		return err
	}
	start := time.Now()
	for i, ev := range events {
		switch ev.Action {
		case Alloc:
			if ev.Ptr == 0 {
				res.NullAllocs++
				continue
			}
			if err := checkNotLive(ev, i, live, failed); err != nil {
				return res, err
			}
			p, err := a.Alloc(ev.Size, ev.Stream)
			if err != nil {
				res.Failed++
				failed[ev.Ptr] = struct{}{}
				if res.FirstErr == nil {
					res.FirstErr = fmt.Errorf("%s (allocate %d bytes on stream 0x%x): %w", where(ev, i), ev.Size, ev.Stream, err)
				}
				if idler != nil && streams[ev.Stream] == nil {
					idler.StreamIdle(ev.Stream)
				}
				continue
			}
			st := streams[ev.Stream]
			if st == nil {
				st = &streamLive{id: ev.Stream}
				streams[ev.Stream] = st
			}
			st.live++
			live[ev.Ptr] = liveAlloc{p, st}
			res.Allocs++
		case Free:
			if ev.Ptr == 0 {
				continue
			}
			l, ok := live[ev.Ptr]
			if !ok {
				if _, f := failed[ev.Ptr]; f {
					delete(failed, ev.Ptr)
					res.SkippedFrees++
				} else {
					res.UnknownFrees++
				}
				continue
			}
			delete(live, ev.Ptr)
			if err := release(l); err != nil {
				return res, fmt.Errorf("trace %s: free: %w", where(ev, i), err)
			}
			res.Frees++
		case AllocFailed:
			res.TraceFailures++
		}
	}
	res.Elapsed = time.Since(start)
	// Free what the trace left live, so the allocator ends empty.
	var errs []error
	for _, l := range live {
		errs = append(errs, release(l))
	}
	return res, errors.Join(errs...)
}

// checkNotLive refuses an allocation of a pointer the trace holds live.
func checkNotLive[V any](ev Event, i int, live map[uint64]V, failed map[uint64]struct{}) error {
	_, dup := live[ev.Ptr]
	if !dup {
		_, dup = failed[ev.Ptr]
	}
	if !dup {
		return nil
	}
	msg := fmt.Sprintf("allocates 0x%x, which the trace allocated before and has not freed: the trace is inconsistent (a free line missing, or logs of two processes mixed)", ev.Ptr)
	if ev.Line == 0 {
		msg = fmt.Sprintf("event %d %s", i+1, msg)
	}
	return &LineError{ev.Line, msg}
}

// Check reports the first event Replay would refuse as inconsistent: an
// allocation of a pointer that is live already. Its memory follows the
// live pointers.
func Check(events []Event) error {
	live := make(map[uint64]struct{})
	for i, ev := range events {
		switch {
		case ev.Ptr == 0:
		case ev.Action == Alloc:
			if err := checkNotLive(ev, i, live, nil); err != nil {
				return err
			}
			live[ev.Ptr] = struct{}{}
		case ev.Action == Free:
			delete(live, ev.Ptr)
		}
	}
	return nil
}
