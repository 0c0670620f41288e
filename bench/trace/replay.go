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

// Result is what one replay did.
type Result struct {
	Allocs, Frees int
	// Failed counts allocations the allocator refused; the trace goes on
	// (later frees of those pointers are skipped), as an application that
	// handles OOM would.
	Failed int
	// TraceFailures counts "allocate failure" lines: the traced
	// allocator's own refusals, replayed as nothing.
	TraceFailures int
	// UnknownFrees counts frees of pointers the trace never allocated
	// (logs that start mid-run) or whose allocation failed here.
	UnknownFrees int
	Elapsed      time.Duration
	FirstErr     error // the first allocation error, for the report
}

// Replay runs events through a, timing the whole run. Allocation errors are
// counted, not fatal; a Free error is fatal (the allocator rejected a
// pointer it handed out).
func Replay(events []Event, a Allocator) (Result, error) {
	var res Result
	live := make(map[uint64]uint64, 1024) // trace pointer -> our pointer
	start := time.Now()
	for i, ev := range events {
		switch ev.Action {
		case Alloc:
			p, err := a.Alloc(ev.Size, ev.Stream)
			if err != nil {
				res.Failed++
				if res.FirstErr == nil {
					res.FirstErr = fmt.Errorf("event %d (allocate %d bytes): %w", i+1, ev.Size, err)
				}
				continue
			}
			if _, dup := live[ev.Ptr]; dup {
				return res, fmt.Errorf("trace event %d allocates 0x%x, which is already live: the trace is inconsistent", i+1, ev.Ptr)
			}
			live[ev.Ptr] = p
			res.Allocs++
		case Free:
			p, ok := live[ev.Ptr]
			if !ok {
				res.UnknownFrees++
				continue
			}
			delete(live, ev.Ptr)
			if err := a.Free(p); err != nil {
				return res, fmt.Errorf("trace event %d: free: %w", i+1, err)
			}
			res.Frees++
		case AllocFailed:
			res.TraceFailures++
		}
	}
	res.Elapsed = time.Since(start)
	// Free what the trace left live, so the allocator ends empty.
	var errs []error
	for _, p := range live {
		errs = append(errs, a.Free(p))
	}
	return res, errors.Join(errs...)
}
