package redistier

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// newCallCache returns a cache whose calls go nowhere (New sends nothing;
// the tests give callValue ops of their own), with a 20 ms Timeout, that
// runs its calls in place when inline is set and on a goroutine of their
// own otherwise.
func newCallCache(t *testing.T, inline bool) *Cache {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: inline})
	t.Cleanup(func() { client.Close() })
	c, err := New(client, Options{TrustedNetworkNoMAC: true, Timeout: 20 * time.Millisecond, BreakerFailures: 100})
	if err != nil {
		t.Fatal(err)
	}
	if c.inline != inline {
		t.Fatalf("cache runs calls inline = %v, want %v", c.inline, inline)
	}
	return c
}

// TestCallValueLateReply: an op that answers only after Options.Timeout
// (a client that ignores deadlines, a slow server) has its value dropped:
// callValue returns at the deadline with the zero value and a timeout
// wrapping ErrUnavailable, and the reply that comes later reaches no one.
func TestCallValueLateReply(t *testing.T) {
	c := newCallCache(t, false)
	release := make(chan struct{})
	finished := make(chan struct{})
	// Ends the op whether or not callValue waited for it, so that a
	// callValue that waits fails the test instead of hanging it.
	backstop := time.AfterFunc(2*time.Second, func() { close(release) })
	start := time.Now()
	v, err := callValue(context.Background(), c, "late", func(ctx context.Context) ([]byte, error) {
		defer close(finished)
		<-release
		return []byte("a reply after the deadline"), nil
	})
	took := time.Since(start)
	if backstop.Stop() {
		close(release)
	}
	<-finished
	if v != nil || !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("callValue with a reply after the Timeout = %q, %v; want nil and a timeout wrapping ErrUnavailable", v, err)
	}
	if took > time.Second {
		t.Errorf("callValue took %v with a 20ms Timeout: it waited for the late reply", took)
	}
	if s := c.RedisStats(); s.Abandoned != 1 || s.Timeouts != 1 || s.Errors != 1 {
		t.Errorf("stats after one abandoned call: %+v; want 1 abandoned, 1 timeout, 1 error", s)
	}
}

// TestCallValueOnlyOnSuccess: whatever op returned beside an error is
// dropped, in place or on a goroutine: a value comes back only with a nil
// error.
func TestCallValueOnlyOnSuccess(t *testing.T) {
	for _, inline := range []bool{true, false} {
		c := newCallCache(t, inline)
		for _, tc := range []struct {
			name    string
			err     error
			wantV   int
			wantErr func(error) bool
		}{
			{"success", nil, 42, func(err error) bool { return err == nil }},
			{"missing key", redis.Nil, 0, func(err error) bool { return errors.Is(err, redis.Nil) && !errors.Is(err, ErrUnavailable) }},
			{"failure", errors.New("connection reset"), 0, func(err error) bool { return errors.Is(err, ErrUnavailable) }},
			{"deadline", context.DeadlineExceeded, 0, func(err error) bool {
				return errors.Is(err, ErrUnavailable) && errors.Is(err, context.DeadlineExceeded)
			}},
		} {
			v, err := callValue(context.Background(), c, tc.name, func(context.Context) (int, error) { return 42, tc.err })
			if v != tc.wantV || !tc.wantErr(err) {
				t.Errorf("inline %v: op returning 42 with %v: callValue = %d, %v; want %d", inline, tc.err, v, err, tc.wantV)
			}
		}
	}
}
