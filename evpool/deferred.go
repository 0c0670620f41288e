package evpool

// Deferred: run a callback once the work queued on some streams at the time
// of the call has finished.
//
// Design. Defer records one pooled event per distinct stream and appends a
// waiter (event, entry) to that stream's FIFO; the entry counts the streams
// it still waits for. A stream executes its work in order, so its events
// complete in the order they were recorded, and the FIFO is kept in record
// order (Record and append happen under one lock). Poll therefore asks only
// each stream's head event: when the head is not done, nothing behind it is
// either, and the stream costs one query. When the head is done and more
// waiters follow, Poll asks the tail next: a done tail completes the whole
// FIFO with that one query (the common case after a burst); otherwise Poll
// walks forward from the head, one query per completed waiter, and stops at
// the first that is not done. A Poll costs at most one query per stream
// with pending work plus one per waiter it completes, never one per pending
// waiter. Only streams with pending work are in the active map, so idle and
// destroyed streams cost nothing.
//
// Errors. A query that returns an error (the stream's sticky error, or
// ErrDeviceLost) means the stream is dead: every waiter on that stream is
// completed with the error. An entry keeps the first error among its streams
// and still waits for its other streams, because their work may still be
// using whatever the callback releases.
//
// Drain synchronizes on each stream's last event without holding the lock,
// so that Defer and Poll go on meanwhile. A concurrent Poll may complete
// that waiter; its event is pinned (drainPin) so that it does not go back
// to the pool, where it could be destroyed or recorded again under the
// Synchronize, until the Drain is done with it. Waiters carry a
// Deferred-wide sequence number, so a Drain completes only the waiters up
// to the one it waited for, even if the stream's FIFO was emptied and made
// anew meanwhile.
//
// Events go back to the Pool as their waiters complete, after the lock is
// released (Put may destroy, a driver call).

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/driver"
)

// maxSpareQueues bounds the emptied per-stream FIFOs kept for reuse, so a
// program that cycles through many short-lived streams does not keep one
// FIFO per stream it ever used, while the steady set of streams reuses its
// FIFOs without allocating.
const maxSpareQueues = 64

// entry is one Defer call.
type entry struct {
	fn      func(error)
	pending int   // streams whose waiter has not completed
	err     error // first stream error among them
}

// waiter is an entry's mark on one stream.
type waiter struct {
	ev  driver.Event
	e   *entry
	seq uint64    // Deferred-wide record order, for Drain
	pin *drainPin // non-nil once a Drain has synchronized on ev
}

// drainPin keeps a waiter's event out of the pool while Drains synchronize
// on it without the lock: an event that went back to the pool could be
// destroyed or recorded again under the Synchronize. A waiter that
// completes while pinned leaves its event to the last Drain to unpin it.
type drainPin struct {
	count    int  // Drains synchronizing on the event now
	orphaned bool // the waiter completed while pinned
}

// streamQueue is one stream's FIFO of waiters: q[head:] are pending, in
// record order.
type streamQueue struct {
	q    []waiter
	head int
}

func (q *streamQueue) empty() bool { return q.head == len(q.q) }

func (q *streamQueue) push(w waiter) {
	if q.head > 0 && len(q.q) == cap(q.q) {
		// Reuse the completed prefix instead of growing.
		n := copy(q.q, q.q[q.head:])
		clear(q.q[n:])
		q.q, q.head = q.q[:n], 0
	}
	q.q = append(q.q, w)
}

// Deferred runs callbacks once the work queued on given streams, at the
// time of the Defer call, has finished. Callbacks run on the goroutine
// calling Poll or Drain.
//
// Deferred is safe for concurrent use.
//
// Callbacks run with no lock of the Deferred held, so a callback may
// call Defer, Release, Poll, Pending or Drain.
type Deferred struct {
	// Locking: mu guards active, spare, ready, seq and every streamQueue,
	// entry and drainPin; pending is written under mu and read without it, so
	// Poll and Pending cost one atomic load when nothing is deferred. Defer
	// holds mu across Record so that each FIFO is in record order, and Poll
	// holds it across the event queries of the heads; both are sub-microsecond
	// driver calls. The Pool is never called with mu held, so mu and the
	// Pool's lock never nest. Callbacks run after mu is released, so a
	// callback may call Defer, Release, Poll, Pending or Drain. Drain's
	// Synchronize calls, and Release's host waits, run without mu.

	pool    *Pool
	ordinal int

	mu      sync.Mutex
	active  map[streamKey]*streamQueue // streams with pending waiters only
	spare   []*streamQueue             // emptied FIFOs, up to maxSpareQueues
	ready   []*entry                   // entries whose streams are all done, not yet run
	pending atomic.Int64               // entries deferred and not yet handed out to run; written under mu, read without it
	seq     uint64                     // last waiter sequence number given
}

// NewDeferred makes a Deferred that takes its events from pool; the streams
// given to Defer must belong to the pool's device. With a nil pool, every
// Defer fails.
func NewDeferred(pool *Pool) *Deferred {
	d := &Deferred{pool: pool, active: make(map[streamKey]*streamQueue)}
	if pool != nil {
		d.ordinal = pool.ordinal
	}
	return d
}

// Defer records an event on each of streams now and arranges for fn to run,
// at a later Poll or Drain, once all of them have completed. fn receives the
// first sticky error among those streams (nil if none). A stream given more
// than once is recorded once. With no streams, fn runs at the next Poll.
//
// If an event cannot be got or recorded, Defer returns the error and fn will
// never run. A nil stream is the pool device's default stream. Streams of
// another device than the pool's and a nil fn are errors wrapping
// driver.ErrInvalidValue.
func (d *Deferred) Defer(streams []driver.Stream, fn func(err error)) error {
	switch {
	case fn == nil:
		return fmt.Errorf("evpool: defer with a nil callback: %w", driver.ErrInvalidValue)
	case d.pool == nil:
		return fmt.Errorf("evpool: defer on a Deferred made without a pool: %w", driver.ErrInvalidValue)
	}
	var (
		keyBuf    [4]streamKey
		streamBuf [4]driver.Stream
		evBuf     [4]driver.Event
	)
	keys, uniq := keyBuf[:0], streamBuf[:0]
	for _, s := range streams {
		if d.pool.dev != nil {
			s = driver.StreamOr(d.pool.dev, s)
		}
		if s == nil {
			return fmt.Errorf("evpool: defer: a nil stream on a pool without a device names no stream: %w", driver.ErrInvalidValue)
		}
		k, ok := keyOf(s)
		if !ok {
			return fmt.Errorf("evpool: defer: stream %d has no device: %w", s.ID(), driver.ErrInvalidValue)
		}
		if k.ordinal != d.ordinal {
			return fmt.Errorf("evpool: defer: stream %d is on device %d, want the pool's device %d: %w",
				s.ID(), k.ordinal, d.ordinal, driver.ErrInvalidValue)
		}
		dup := false
		for _, seen := range keys {
			if seen == k {
				dup = true
				break
			}
		}
		if !dup {
			keys = append(keys, k)
			uniq = append(uniq, s)
		}
	}
	e := &entry{fn: fn, pending: len(uniq)}
	if len(uniq) == 0 {
		d.mu.Lock()
		d.ready = append(d.ready, e)
		d.pending.Add(1)
		d.mu.Unlock()
		return nil
	}

	events := evBuf[:0]
	for range uniq {
		ev, err := d.pool.Get()
		if err != nil {
			d.putAll(events)
			return fmt.Errorf("evpool: defer: %w", err)
		}
		events = append(events, ev)
	}

	d.mu.Lock()
	for i, s := range uniq {
		if err := events[i].Record(s); err != nil {
			d.mu.Unlock()
			d.putAll(events)
			return fmt.Errorf("evpool: defer: record event on stream %d of device %d: %w", s.ID(), d.ordinal, err)
		}
	}
	for i, k := range keys {
		q := d.active[k]
		if q == nil {
			q = d.newQueueLocked()
			d.active[k] = q
		}
		d.seq++
		q.push(waiter{ev: events[i], e: e, seq: d.seq})
	}
	d.pending.Add(1)
	d.mu.Unlock()
	return nil
}

func (d *Deferred) putAll(events []driver.Event) {
	for _, ev := range events {
		d.pool.Put(ev)
	}
}

// newQueueLocked returns an empty FIFO; d.mu held.
func (d *Deferred) newQueueLocked() *streamQueue {
	if n := len(d.spare); n > 0 {
		q := d.spare[n-1]
		d.spare[n-1] = nil
		d.spare = d.spare[:n-1]
		return q
	}
	return &streamQueue{}
}

// retireLocked drops an emptied FIFO from the active map; d.mu held.
func (d *Deferred) retireLocked(k streamKey, q *streamQueue) {
	delete(d.active, k)
	q.q, q.head = q.q[:0], 0
	if len(d.spare) < maxSpareQueues {
		d.spare = append(d.spare, q)
	}
}

// completeLocked pops q's head waiter with err; d.mu held. The event is
// appended to *free for the caller to return to the pool after unlocking.
func (d *Deferred) completeLocked(q *streamQueue, err error, free *[]driver.Event) {
	w := q.q[q.head]
	q.q[q.head] = waiter{}
	q.head++
	if w.pin != nil && w.pin.count > 0 {
		w.pin.orphaned = true
	} else {
		*free = append(*free, w.ev)
	}
	if err != nil && w.e.err == nil {
		w.e.err = err
	}
	w.e.pending--
	if w.e.pending == 0 {
		d.ready = append(d.ready, w.e)
	}
}

// completeAllLocked pops every waiter of q with err (the stream is dead);
// d.mu held.
func (d *Deferred) completeAllLocked(q *streamQueue, err error, free *[]driver.Event) {
	for !q.empty() {
		d.completeLocked(q, err, free)
	}
}

// advanceLocked pops q's completed waiters; d.mu held. See the file comment
// for the query strategy.
func (d *Deferred) advanceLocked(q *streamQueue, free *[]driver.Event) {
	done, err := q.q[q.head].ev.Query()
	switch {
	case err != nil:
		d.completeAllLocked(q, err, free)
		return
	case !done:
		return
	}
	limit := len(q.q) // waiters below limit may still be queried
	if limit-q.head > 1 {
		tdone, terr := q.q[limit-1].ev.Query()
		if tdone && terr == nil {
			d.completeAllLocked(q, nil, free)
			return
		}
		if terr == nil {
			limit-- // the tail is not done: no need to ask again
		}
	}
	d.completeLocked(q, nil, free)
	for q.head < limit {
		done, err := q.q[q.head].ev.Query()
		switch {
		case err != nil:
			d.completeAllLocked(q, err, free)
			return
		case !done:
			return
		}
		d.completeLocked(q, nil, free)
	}
}

// takeReadyLocked hands the ready entries out to run; d.mu held.
func (d *Deferred) takeReadyLocked() []*entry {
	run := d.ready
	d.ready = nil
	d.pending.Add(-int64(len(run)))
	return run
}

// Poll runs every callback whose streams have completed and returns how many
// ran. It never blocks on the device: it queries each stream with pending
// work at its head (see the type's design note), so its cost grows with the
// streams that have pending work, not with the pending callbacks.
func (d *Deferred) Poll() int {
	if d.pending.Load() == 0 {
		return 0 // nothing deferred: no waiter, no ready entry, no lock
	}
	var free []driver.Event
	d.mu.Lock()
	for k, q := range d.active {
		d.advanceLocked(q, &free)
		if q.empty() {
			d.retireLocked(k, q)
		}
	}
	run := d.takeReadyLocked()
	d.mu.Unlock()
	d.putAll(free)
	d.run(run)
	return len(run)
}

// run calls the callbacks in order. If one panics, the ones after it are put
// back to run at the next Poll, so none is lost or run twice, and the panic
// goes on.
func (d *Deferred) run(entries []*entry) {
	i := 0
	defer func() {
		if i < len(entries) {
			rest := entries[i+1:]
			d.mu.Lock()
			d.ready = append(d.ready, rest...)
			d.pending.Add(int64(len(rest)))
			d.mu.Unlock()
		}
	}()
	for ; i < len(entries); i++ {
		entries[i].fn(entries[i].err)
	}
}

// Pending returns how many deferred callbacks have not started to run.
// It takes no lock, so an allocator may call it on its hot path to skip
// Poll when nothing is pending.
func (d *Deferred) Pending() int { return int(d.pending.Load()) }

// drainTarget is the last waiter of one stream when a Drain round began.
type drainTarget struct {
	key streamKey
	ev  driver.Event
	seq uint64
	pin *drainPin
	err error
}

// Drain waits for the work of every pending entry, runs the callbacks and
// returns once nothing is pending, including entries that its callbacks or
// other goroutines deferred meanwhile (a callback that always defers again
// keeps Drain going). Each round synchronizes once per stream with pending
// work, on its last event, without holding the lock.
//
// Stream errors go to the callbacks waiting on those streams, as with Poll;
// Drain also returns them, joined, one per failed stream per round, so a
// caller that only drains still learns that queued work failed.
func (d *Deferred) Drain() error {
	var errs []error
	var targets []drainTarget
	for {
		d.mu.Lock()
		if d.pending.Load() == 0 {
			d.mu.Unlock()
			return errors.Join(errs...)
		}
		targets = targets[:0]
		for k, q := range d.active {
			last := &q.q[len(q.q)-1]
			if last.pin == nil {
				last.pin = &drainPin{}
			}
			last.pin.count++
			targets = append(targets, drainTarget{key: k, ev: last.ev, seq: last.seq, pin: last.pin})
		}
		d.mu.Unlock()

		// The pins keep each target's event out of the pool until this
		// round ends, so Synchronize waits for the target waiter's mark even
		// if a concurrent Poll completes the waiter meanwhile.
		for i := range targets {
			targets[i].err = targets[i].ev.Synchronize()
		}

		var free []driver.Event
		d.mu.Lock()
		for _, t := range targets {
			t.pin.count--
			if t.pin.count == 0 && t.pin.orphaned {
				free = append(free, t.ev)
			}
			q := d.active[t.key]
			if q == nil || q.q[q.head].seq > t.seq {
				// Another Poll or Drain completed the target waiter, and
				// everything before it, and delivered their errors.
				continue
			}
			if t.err == nil {
				for !q.empty() && q.q[q.head].seq <= t.seq {
					d.completeLocked(q, nil, &free)
				}
			} else {
				errs = append(errs, t.err)
				d.completeFailedLocked(q, t.seq, t.err, &free)
			}
			if q.empty() {
				d.retireLocked(t.key, q)
			}
		}
		run := d.takeReadyLocked()
		d.mu.Unlock()
		d.putAll(free)
		d.run(run)
	}
}

// completeFailedLocked completes q's waiters up to seq after Synchronize of
// the waiter seq failed with syncErr: waiters that finished before the
// failure complete cleanly, the rest with the stream's error; d.mu held.
func (d *Deferred) completeFailedLocked(q *streamQueue, seq uint64, syncErr error, free *[]driver.Event) {
	for !q.empty() && q.q[q.head].seq <= seq {
		done, err := q.q[q.head].ev.Query()
		switch {
		case err != nil:
			for !q.empty() && q.q[q.head].seq <= seq {
				d.completeLocked(q, err, free)
			}
			return
		case !done:
			// Synchronize failed yet the work is not done: the event's own
			// state is unknown, so the failure stands for the stream.
			err = syncErr
			for !q.empty() && q.q[q.head].seq <= seq {
				d.completeLocked(q, err, free)
			}
			return
		}
		d.completeLocked(q, nil, free)
	}
}
