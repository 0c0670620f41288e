package redistier

// The circuit breaker.
//
// A dead or stalled server costs every call its full Timeout; a compile
// that misses a few hundred keys would wait that long for each. After
// BreakerFailures consecutive failed calls the breaker opens: calls fail at
// once (ErrBreakerOpen, counted in Stats.Rejected) without reaching Redis.
// After BreakerCooldown it lets exactly one call through (half-open: the
// probe) while it keeps refusing the others; the probe's success closes
// it, its failure opens it for another cooldown. A call whose caller gave
// up (its own context ended) says nothing about the server: it neither
// counts as a failure nor settles a probe.

import (
	"encoding"
	"fmt"
	"sync"
	"time"
)

// BreakerState is the state of the circuit breaker.
type BreakerState int32

const (
	// BreakerClosed: calls reach Redis.
	BreakerClosed BreakerState = iota
	// BreakerOpen: calls are refused until the cooldown has passed.
	BreakerOpen
	// BreakerHalfOpen: one probe call is in flight; the others are
	// refused until it settles the state.
	BreakerHalfOpen
)

var _ encoding.TextMarshaler = BreakerState(0)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("BreakerState(%d)", int32(s))
}

// MarshalText writes the String form, so Stats prints the state by name
// in JSON.
func (s BreakerState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// verdict is what a finished call says about the server.
type verdict int

const (
	verdictOK      verdict = iota // the server answered (a reply error too)
	verdictFailed                 // no answer: network error or timeout
	verdictNeutral                // the caller gave up: nothing learnt
)

// breaker is the circuit breaker.
//
// Locking: mu guards every field but the settings (threshold, cooldown,
// now), which are set before the breaker is shared. Nothing is called
// under mu.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu       sync.Mutex
	state    BreakerState
	failures int       // consecutive failures while closed
	openedAt time.Time // when it last opened
	opens    int64     // transitions to open
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, now: time.Now}
}

// allow reports whether a call may go to Redis now, and whether it is the
// probe of a half-open breaker (whose outcome must be passed to done).
func (b *breaker) allow() (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerClosed:
		return true, false
	case BreakerOpen:
		if b.now().Sub(b.openedAt) >= b.cooldown {
			b.state = BreakerHalfOpen
			return true, true
		}
	}
	return false, false
}

// done records the outcome of a call that allow let through.
func (b *breaker) done(probe bool, v verdict) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		switch v {
		case verdictOK:
			b.state, b.failures = BreakerClosed, 0
		case verdictFailed:
			b.openLocked()
		case verdictNeutral:
			// Nothing learnt: the next call probes instead. The state
			// stays half-open with no probe in flight, so allow must
			// let one through: go back to open with the cooldown
			// already passed.
			b.state = BreakerOpen
		}
		return
	}
	if b.state != BreakerClosed {
		// A call that started before the breaker opened: the probe
		// decides from here on.
		return
	}
	switch v {
	case verdictOK:
		b.failures = 0
	case verdictFailed:
		b.failures++
		if b.failures >= b.threshold {
			b.openLocked()
		}
	}
}

// openLocked opens the breaker now; mu is held.
func (b *breaker) openLocked() {
	b.state, b.openedAt, b.failures = BreakerOpen, b.now(), 0
	b.opens++
}

// snapshot returns the state and the number of times the breaker opened.
func (b *breaker) snapshot() (BreakerState, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state, b.opens
}
