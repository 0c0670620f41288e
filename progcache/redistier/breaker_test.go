package redistier

import (
	"testing"
	"time"
)

// TestBreaker walks the breaker through its states on a fake clock: each
// step is a call's admission and, when admitted, its outcome.
func TestBreaker(t *testing.T) {
	type step struct {
		advance   time.Duration // clock moves first
		wantAllow bool
		wantProbe bool
		outcome   verdict // for an admitted call
		wantState BreakerState
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"successes keep it closed", []step{
			{0, true, false, verdictOK, BreakerClosed},
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictOK, BreakerClosed}, // resets the count
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerClosed},
		}},
		{"opens after threshold failures, refuses, probes once", []step{
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerOpen},
			{time.Second - 1, false, false, 0, BreakerOpen},
			{1, true, true, -1, BreakerHalfOpen},  // the probe, still in flight
			{0, false, false, 0, BreakerHalfOpen}, // others refused meanwhile
		}},
		{"probe success closes", []step{
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerOpen},
			{time.Second, true, true, verdictOK, BreakerClosed},
			{0, true, false, verdictFailed, BreakerClosed}, // the count starts again
		}},
		{"probe failure reopens for a new cooldown", []step{
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerOpen},
			{time.Second, true, true, verdictFailed, BreakerOpen},
			{time.Second / 2, false, false, 0, BreakerOpen},
			{time.Second / 2, true, true, verdictOK, BreakerClosed},
		}},
		{"a probe whose caller gave up lets the next call probe", []step{
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerOpen},
			{time.Second, true, true, verdictNeutral, BreakerOpen},
			{0, true, true, verdictOK, BreakerClosed},
		}},
		{"a caller giving up is not a failure", []step{
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictFailed, BreakerClosed},
			{0, true, false, verdictNeutral, BreakerClosed},
			{0, true, false, verdictNeutral, BreakerClosed},
			{0, true, false, verdictFailed, BreakerOpen},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			b := newBreaker(3, time.Second)
			b.now = func() time.Time { return now }
			for i, s := range tc.steps {
				now = now.Add(s.advance)
				ok, probe := b.allow()
				if ok != s.wantAllow || probe != s.wantProbe {
					t.Fatalf("step %d: allow = %v, probe %v; want %v, %v", i, ok, probe, s.wantAllow, s.wantProbe)
				}
				if ok && s.outcome >= 0 {
					b.done(probe, s.outcome)
				}
				if st, _ := b.snapshot(); st != s.wantState {
					t.Fatalf("step %d: state %v, want %v", i, st, s.wantState)
				}
			}
		})
	}
}

// TestBreakerLateResults: results of calls admitted before the breaker
// opened do not move it once it has; the probe decides.
func TestBreakerLateResults(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newBreaker(1, time.Second)
	b.now = func() time.Time { return now }
	_, p1 := b.allow()
	_, p2 := b.allow()
	b.done(p1, verdictFailed) // opens
	b.done(p2, verdictOK)     // late success: ignored
	if st, opens := b.snapshot(); st != BreakerOpen || opens != 1 {
		t.Fatalf("state %v, %d opens after a failure and a late success; want open, 1", st, opens)
	}
	if ok, _ := b.allow(); ok {
		t.Fatal("a late success let a call through an open breaker")
	}
}

func TestBreakerStateText(t *testing.T) {
	for s, want := range map[BreakerState]string{BreakerClosed: "closed", BreakerOpen: "open", BreakerHalfOpen: "half-open", 7: "BreakerState(7)"} {
		if b, _ := s.MarshalText(); string(b) != want {
			t.Errorf("BreakerState(%d) text %q, want %q", int32(s), b, want)
		}
	}
}
