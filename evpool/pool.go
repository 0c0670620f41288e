package evpool

import (
	"errors"
	"fmt"
	"sync"

	"github.com/accelkit/accelkit/driver"
)

// DefaultMaxIdle is the idle set's bound when PoolOptions.MaxIdle is 0. It
// is bounded so that a burst (thousands of frees deferred at once) does not
// keep its events for good once it is over; 64 lets a steady state with up
// to 64 events in flight at a time recycle every one of them. An idle event
// holds only a small driver object.
const DefaultMaxIdle = 64

// ErrClosed is returned by Pool.Get and Handles.Get after Close. It wraps
// driver.ErrClosed, so errors.Is(err, driver.ErrClosed) holds across
// accelkit.
var ErrClosed = fmt.Errorf("evpool: closed: %w", driver.ErrClosed)

// PoolOptions configures a Pool. The zero value is the default.
type PoolOptions struct {
	// MaxIdle bounds how many idle events the pool keeps; Put destroys the
	// events beyond it. 0 means DefaultMaxIdle; a negative value keeps
	// none, so every Put destroys (useful to compare against fresh
	// creation).
	MaxIdle int
}

// PoolStats counts a pool's events since it was made.
type PoolStats struct {
	Created   uint64 // events made by the device (Get found no idle event)
	Reused    uint64 // Gets served from the idle set
	Idle      uint64 // events in the idle set now
	Destroyed uint64 // events destroyed: idle set full, pool closed, Close, or Foreign
	Foreign   uint64 // Puts of events of another device (destroyed, counted in Destroyed too)
}

// Pool recycles the events of one device. Get hands out an idle event or
// makes one; Put returns it once its recorded work no longer matters (for a
// recorded event: after Query reported it done, or when the caller will
// re-record it before asking again).
//
// Pool is safe for concurrent use.
//
// A Pool takes no other lock while it holds its own and never calls
// the driver under it, so a caller may use a Pool while holding its own
// locks.
type Pool struct {
	// Locking: mu guards idle, closed and the counters; it is held only to push
	// or pop the idle slice and count, never across a driver call, and Pool
	// takes no other lock while holding it, so a caller may use a Pool under
	// its own locks. (A lock-free stack needs a node per Put and measured
	// slower: BenchmarkIdleSet.)

	dev     driver.Device
	ordinal int
	maxIdle int

	mu                                  sync.Mutex
	idle                                []driver.Event
	closed                              bool
	created, reused, destroyed, foreign uint64
}

// NewPool makes a pool of dev's events.
func NewPool(dev driver.Device, opts PoolOptions) *Pool {
	maxIdle := opts.MaxIdle
	switch {
	case maxIdle == 0:
		maxIdle = DefaultMaxIdle
	case maxIdle < 0:
		maxIdle = 0
	}
	p := &Pool{dev: dev, maxIdle: maxIdle}
	if dev != nil {
		p.ordinal = dev.Ordinal()
	}
	return p
}

// Device returns the device the pool's events belong to.
func (p *Pool) Device() driver.Device { return p.dev }

// Get returns an idle event, or a new one from the device when none is idle.
// The event may carry an old mark: record it before querying it. After
// Close, Get fails with an error wrapping ErrClosed.
func (p *Pool) Get() (driver.Event, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("evpool: get event from pool of device %d: %w", p.ordinal, ErrClosed)
	}
	if n := len(p.idle); n > 0 {
		e := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.reused++
		p.mu.Unlock()
		return e, nil
	}
	p.mu.Unlock()
	if p.dev == nil {
		return nil, fmt.Errorf("evpool: pool has no device: %w", driver.ErrInvalidValue)
	}
	e, err := p.dev.NewEvent()
	if err != nil {
		return nil, fmt.Errorf("evpool: new event on device %d: %w", p.ordinal, err)
	}
	p.mu.Lock()
	p.created++
	p.mu.Unlock()
	return e, nil
}

// Put returns e to the pool. Put has no error result, so what cannot be kept
// is destroyed and counted instead: the event when the idle set is full or
// the pool is closed, and an event of another device (by ordinal), which is
// also counted in Stats().Foreign. A destroy failure is dropped: the event
// is gone from the pool either way. Put(nil) does nothing.
func (p *Pool) Put(e driver.Event) {
	if e == nil {
		return
	}
	if d := e.Device(); d == nil || d.Ordinal() != p.ordinal {
		p.mu.Lock()
		p.foreign++
		p.mu.Unlock()
		_ = p.destroy(e) // Put has no error result; the event leaves the pool either way (see doc)
		return
	}
	p.mu.Lock()
	if !p.closed && len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, e)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = p.destroy(e) // as above: dropped by design, counted in Stats().Destroyed
}

// destroy destroys e and counts it; mu not held.
func (p *Pool) destroy(e driver.Event) error {
	p.mu.Lock()
	p.destroyed++
	p.mu.Unlock()
	return e.Destroy()
}

// Stats returns the pool's counters, read together under the pool's lock.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{
		Created:   p.created,
		Reused:    p.reused,
		Idle:      uint64(len(p.idle)),
		Destroyed: p.destroyed,
		Foreign:   p.foreign,
	}
}

// Close destroys the idle events and makes later Gets fail; events Put
// after Close are destroyed. It returns the destroy failures, joined. A
// second Close does nothing and returns nil.
func (p *Pool) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.closed = true
	p.mu.Unlock()
	var errs []error
	for _, e := range idle {
		if err := p.destroy(e); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("evpool: close pool of device %d: %w", p.ordinal, err)
	}
	return nil
}
