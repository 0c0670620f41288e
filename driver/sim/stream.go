package sim

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"

	"github.com/accelkit/accelkit/driver"
)

// item is one unit of queued stream work.
type item struct {
	run    func() error // nil for a marker (injected failure only)
	inject bool         // FailStream: fail instead of running
}

// stream is a sim stream: an ordered queue run by its own goroutine.
//
// Locking: mu guards every field below it; work is signalled when an item is
// queued or the stream must stop, done is broadcast when an item completes or
// the device aborts. Lock order: a stream's mu is never held while taking the
// device's mu, another stream's mu or a table's mu.
type stream struct {
	dev *Device
	id  uint64

	mu        sync.Mutex
	work      *sync.Cond
	done      *sync.Cond
	queue     []item
	head      int    // queue[head:] is pending
	enq       uint64 // items ever queued; a Record captures it as a position
	completed uint64 // items finished (run, failed or skipped)
	err       error  // sticky: the first failure of queued work
	errPos    uint64 // position of the failed item
	failNext  bool   // FailStream: fail the next queued item
	busy      bool   // an item is running (on the goroutine or a helping waiter)
	destroyed bool   // Destroy called: no new work, goroutine exits when drained
	exited    bool
}

func newStream(d *Device, id uint64) *stream {
	s := &stream{dev: d, id: id}
	s.work = sync.NewCond(&s.mu)
	s.done = sync.NewCond(&s.mu)
	d.wg.Add(1)
	go s.loop()
	return s
}

// loop runs queued items in order until the stream is destroyed and drained
// or the device aborts.
func (s *stream) loop() {
	defer s.dev.wg.Done()
	s.mu.Lock()
	for {
		for (s.head == len(s.queue) || s.busy) && !s.destroyed && s.dev.live() {
			s.work.Wait()
		}
		if !s.dev.live() {
			// Closed or lost: drop what is queued; waiters see the device state.
			s.completed = s.enq
			s.queue, s.head = nil, 0
			break
		}
		if s.head == len(s.queue) && !s.busy { // destroyed and drained
			break
		}
		if s.busy { // destroyed while a waiter runs an item: wait for it
			s.work.Wait()
			continue
		}
		s.runNextLocked()
	}
	s.exited = true
	s.done.Broadcast()
	s.mu.Unlock()
	s.dev.forget(s)
}

// runNextLocked runs the next queued item. Caller holds mu, which is
// released while the item runs; the queue is not empty and no item runs.
// The stream's goroutine calls it, and so does a goroutine that would
// otherwise block waiting for the stream (help in waitPosLocked): items
// still run one at a time in order, but a copy that is waited for at once
// runs on the waiter's core instead of paying a goroutine handoff.
func (s *stream) runNextLocked() {
	it := s.queue[s.head]
	s.queue[s.head] = item{}
	s.head++
	if s.head == len(s.queue) {
		s.queue, s.head = s.queue[:0], 0
	}
	skip := s.err != nil
	s.busy = true
	s.mu.Unlock()

	var err error
	switch {
	case skip: // after a failure the stream's state is undefined: run nothing more
	case it.inject:
		err = fmt.Errorf("sim device %d stream %d: queued work failed (FailStream): %w (%w)",
			s.dev.ordinal, s.id, ErrInjected, driver.ErrInvalidValue)
	case it.run != nil:
		err = it.run()
	}

	s.mu.Lock()
	s.busy = false
	if s.completed < s.enq { // an abort may have counted it already
		s.completed++
	}
	if err != nil && s.err == nil {
		s.err, s.errPos = err, s.completed
	}
	s.done.Broadcast()
	s.work.Signal()
}

// wake wakes the goroutine and every waiter (device abort).
func (s *stream) wake() {
	s.mu.Lock()
	s.work.Broadcast()
	s.done.Broadcast()
	s.mu.Unlock()
}

// enqueue queues it. Caller has validated the stream.
func (s *stream) enqueue(op string, run func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(op); err != nil {
		return err
	}
	if s.err != nil {
		return fmt.Errorf("sim device %d: %s on stream %d after its queued work failed: %w", s.dev.ordinal, op, s.id, s.err)
	}
	s.pushLocked(item{run: run})
	if !s.busy {
		// The signal readied the stream's goroutine on the caller's P,
		// where it would wait until the caller blocks; a device starts
		// queued work at once, so give it the core and let the caller go
		// on on another one. Without this, a caller that keeps queueing
		// (a staging pipeline) ran ahead and its copies piled up behind
		// it, to be done on one core at the end.
		s.mu.Unlock()
		runtime.Gosched()
		s.mu.Lock()
	}
	return nil
}

// pushLocked queues it, applying a pending FailStream. Caller holds mu.
func (s *stream) pushLocked(it item) {
	if s.failNext {
		it.inject, s.failNext = true, false
	}
	s.queue = append(s.queue, it)
	s.enq++
	s.work.Signal()
}

// usableLocked reports why no work may be queued on s. Caller holds mu.
func (s *stream) usableLocked(op string) error {
	if err := s.dev.state.Check(op); err != nil {
		return err
	}
	if s.destroyed {
		return s.dev.state.DestroyedError(op, "stream "+strconv.FormatUint(s.id, 10))
	}
	return nil
}

// waitPosLocked waits until the item at position pos has completed or the
// device aborted. With help, the waiter runs queued items itself while no
// other goroutine does (see runNextLocked); a stream goroutine waiting for
// another stream (WaitEvent) does not help. Caller holds mu.
func (s *stream) waitPosLocked(pos uint64, help bool) {
	for s.completed < pos && !s.exited && s.dev.live() {
		if help && !s.busy && s.head < len(s.queue) {
			s.runNextLocked()
			continue
		}
		s.done.Wait()
	}
}

// errAtLocked is the stream's sticky error when it concerns work at or before
// position pos. Caller holds mu.
func (s *stream) errAtLocked(pos uint64) error {
	if s.err != nil && s.errPos <= pos {
		return s.err
	}
	return nil
}

// Device returns the stream's device.
func (s *stream) Device() driver.Device { return s.dev.state.Public }

// ID returns the stream's ID; the default stream's is 0.
func (s *stream) ID() uint64 { return s.id }

// Query reports whether all queued work has finished and the sticky error.
func (s *stream) Query() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked("Stream.Query"); err != nil {
		return false, err
	}
	return s.completed == s.enq, s.err
}

// Synchronize waits for the work queued so far and returns the sticky error.
func (s *stream) Synchronize() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked("Stream.Synchronize"); err != nil {
		return err
	}
	s.waitPosLocked(s.enq, true)
	if err := s.dev.state.Check("Stream.Synchronize"); err != nil {
		return err
	}
	return s.err
}

// WaitEvent makes later work on s wait until e's recorded work completes.
func (s *stream) WaitEvent(e driver.Event) error {
	ev, ok := e.(*event)
	if !ok || ev == nil || ev.dev.drv != s.dev.drv {
		return fmt.Errorf("sim device %d: WaitEvent on stream %d: event %T is not from this sim driver: %w", s.dev.ordinal, s.id, e, driver.ErrInvalidValue)
	}
	on, pos, err := ev.mark("WaitEvent")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked("WaitEvent"); err != nil {
		return err
	}
	if on == nil || on == s { // unrecorded, or earlier work of s itself: already ordered
		if s.failNext {
			s.pushLocked(item{})
		}
		return nil
	}
	s.pushLocked(item{run: func() error {
		on.mu.Lock()
		on.waitPosLocked(pos, false)
		on.mu.Unlock()
		if err := on.dev.state.Check("WaitEvent"); err != nil && on.dev != s.dev {
			return fmt.Errorf("sim device %d stream %d: waited-on event's device: %w", s.dev.ordinal, s.id, err)
		}
		return nil
	}})
	return nil
}

// Destroy releases the stream once its queued work has run; later use of it
// is an error. The default stream cannot be destroyed.
func (s *stream) Destroy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked("Stream.Destroy"); err != nil {
		return err
	}
	if s.id == 0 {
		return fmt.Errorf("sim device %d: the default stream cannot be destroyed: %w", s.dev.ordinal, driver.ErrInvalidValue)
	}
	s.destroyed = true
	s.work.Signal()
	return nil
}

// event is a sim event: a position in one stream's order.
//
// Locking: mu guards on, pos and destroyed. It is never held while taking a
// stream's mu.
type event struct {
	dev       *Device
	mu        sync.Mutex
	on        *stream // stream of the last Record; nil if never recorded
	pos       uint64  // on's position at Record
	destroyed bool
}

// Device returns the event's device.
func (e *event) Device() driver.Device { return e.dev.state.Public }

// mark returns the recorded position, or an error if e cannot be used.
func (e *event) mark(op string) (*stream, uint64, error) {
	if err := e.dev.state.Check(op); err != nil {
		return nil, 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		return nil, 0, e.dev.state.DestroyedError(op, "event")
	}
	return e.on, e.pos, nil
}

// Record marks the work queued on s so far.
func (e *event) Record(s driver.Stream) error {
	st, err := e.dev.stream(s, "Event.Record")
	if err != nil {
		return err
	}
	if _, _, err := e.mark("Event.Record"); err != nil {
		return err
	}
	if err := e.dev.fault("Event.Record", false); err != nil {
		return err
	}
	st.mu.Lock()
	if err := st.usableLocked("Event.Record"); err != nil {
		st.mu.Unlock()
		return err
	}
	if st.failNext { // the record itself is the next work item: it fails
		st.pushLocked(item{})
	}
	pos := st.enq
	st.mu.Unlock()
	e.dev.stats.eventRecords.Add(1)

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		return e.dev.state.DestroyedError("Event.Record", "event")
	}
	e.on, e.pos = st, pos
	return nil
}

// Query reports whether the recorded work has finished; an unrecorded event
// is done. err is the recorded stream's failure at or before the mark.
func (e *event) Query() (bool, error) {
	on, pos, err := e.mark("Event.Query")
	if err != nil {
		return false, err
	}
	e.dev.stats.eventQueries.Add(1)
	if on == nil {
		return true, nil
	}
	on.mu.Lock()
	defer on.mu.Unlock()
	done := on.completed >= pos || on.exited
	return done, on.errAtLocked(pos)
}

// Synchronize waits for the recorded work.
func (e *event) Synchronize() error {
	on, pos, err := e.mark("Event.Synchronize")
	if err != nil || on == nil {
		return err
	}
	on.mu.Lock()
	on.waitPosLocked(pos, true)
	err = on.errAtLocked(pos)
	on.mu.Unlock()
	if derr := e.dev.state.Check("Event.Synchronize"); derr != nil {
		return derr
	}
	return err
}

// Destroy releases the event; later use of it is an error.
func (e *event) Destroy() error {
	if err := e.dev.state.Check("Event.Destroy"); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.destroyed {
		return fmt.Errorf("sim device %d: Event.Destroy: event already destroyed: %w", e.dev.ordinal, driver.ErrInvalidValue)
	}
	e.destroyed = true
	e.on = nil
	return nil
}
