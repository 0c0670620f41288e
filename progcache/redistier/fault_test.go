package redistier_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
)

// faultOpts fail fast: short calls, a breaker that opens after three
// failures and probes again soon.
var faultOpts = redistier.Options{Timeout: 50 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: 100 * time.Millisecond}

// writeOps are the methods that report Redis failures as errors, each
// called with arguments that succeed on a reachable server.
func writeOps(c *redistier.Cache) map[string]func() error {
	return map[string]func() error{
		"Put":    func() error { return c.Put(bg, cachetest.KeyN(50), cachetest.ObjectN(50, 100)) },
		"Delete": func() error { return c.Delete(bg, cachetest.KeyN(50)) },
		"Len":    func() error { _, err := c.Len(bg); return err },
		"Clear":  func() error { return c.Clear(bg) },
		"Acquire": func() error {
			l, err := c.AcquireLease(bg, cachetest.KeyN(51))
			if l != nil {
				return l.Release(bg)
			}
			return err
		},
		"Prefetch": func() error {
			_, err := c.Prefetch(bg, []progcache.Key{cachetest.KeyN(1)}, func(progcache.Key, progcache.Object) error { return nil })
			return err
		},
	}
}

// TestServerKilled SIGKILLs the server while goroutines use the cache,
// then restarts it on the same port: lookups stay misses without errors,
// writes fail with ErrUnavailable (counted), the breaker opens, and once
// the server is back everything works again.
func TestServerKilled(t *testing.T) {
	srv := redistest.Start(t)
	c := openCache(t, clientOf(t, srv.Addr, false), faultOpts)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := (i + w) % 8
				got, ok, err := c.Get(bg, cachetest.KeyN(n))
				if err != nil || (ok && !got.Equal(cachetest.ObjectN(n, 1000))) {
					errs <- fmt.Errorf("Get while the server dies and comes back: hit %v, err %w (want a right hit or a miss, never an error)", ok, err)
					return
				}
				if err := c.Put(bg, cachetest.KeyN(n), cachetest.ObjectN(n, 1000)); err != nil && !errors.Is(err, redistier.ErrUnavailable) {
					errs <- fmt.Errorf("Put while the server is down = %w, want nil or ErrUnavailable", err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // let them run against the live server
	srv.Kill()
	for name, op := range writeOps(c) {
		if err := op(); !errors.Is(err, redistier.ErrUnavailable) {
			t.Errorf("%s with the server killed = %v, want ErrUnavailable", name, err)
		}
	}
	eventually(t, 10*time.Second, "the breaker opens", func() bool { return c.RedisStats().BreakerOpens > 0 })
	down := c.RedisStats()
	srv.Restart()
	eventually(t, 10*time.Second, "Put works after the restart", func() bool {
		return c.Put(bg, cachetest.KeyN(99), cachetest.ObjectN(99, 10)) == nil
	})
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, ok, _ := c.Get(bg, cachetest.KeyN(99)); !ok {
		t.Error("Get after the restart misses what was just put")
	}
	for name, op := range writeOps(c) {
		if err := op(); err != nil {
			t.Errorf("%s after the restart = %v", name, err)
		}
	}
	s := c.RedisStats()
	if down.Errors == 0 || down.PutErrors == 0 || down.Misses == 0 || s.Breaker != redistier.BreakerClosed {
		t.Errorf("stats while down %+v, after %+v: want errors, put errors, misses counted and the breaker closed again", down, s)
	}
	t.Logf("while down: %d errors (%d timeouts), %d refused by the breaker, %d put errors", down.Errors, down.Timeouts, down.Rejected, down.PutErrors)
}

// TestStalledServer stalls the connections (a hung server) with both
// kinds of client: calls time out within Options.Timeout as misses, the
// breaker opens and refuses calls, and after the stall it probes and
// closes.
func TestStalledServer(t *testing.T) {
	srv := redistest.Start(t)
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", honours), func(t *testing.T) {
			proxy, c, k := behindProxy(t, srv, honours)
			proxy.Stall()
			// The caller's own deadline, shorter than Timeout: its error
			// comes back, and says nothing against the server.
			short, cancel := context.WithTimeout(bg, 5*time.Millisecond)
			_, _, err := c.Get(short, k)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Get with an expiring context on a stalled server = %v, want the context's error", err)
			}
			if s := c.RedisStats(); s.Errors != 0 {
				t.Errorf("a call the caller gave up on counted %d errors, want 0", s.Errors)
			}
			for i := range faultOpts.BreakerFailures {
				if _, ok, err := c.Get(bg, k); ok || err != nil {
					t.Fatalf("Get %d on a stalled server = hit %v, err %v; want a miss", i, ok, err)
				}
			}
			s := c.RedisStats()
			if s.Timeouts != int64(faultOpts.BreakerFailures) || s.Breaker != redistier.BreakerOpen || s.BreakerOpens != 1 {
				t.Fatalf("after %d timed-out Gets: %+v; want as many timeouts and the breaker open", faultOpts.BreakerFailures, s)
			}
			// Without deadlines in the client, every call the cache
			// stopped waiting for runs on: the timed-out ones and the one
			// whose caller gave up.
			if honours && s.Abandoned != 0 || !honours && s.Abandoned != s.Timeouts+1 {
				t.Errorf("Abandoned = %d with %d timeouts; want 0 with a client that honours deadlines, one more than the timeouts without", s.Abandoned, s.Timeouts)
			}
			err = c.Put(bg, k, cachetest.ObjectN(1, 100))
			if !errors.Is(err, redistier.ErrBreakerOpen) || !errors.Is(err, redistier.ErrUnavailable) {
				t.Errorf("Put with the breaker open = %v, want ErrBreakerOpen wrapping ErrUnavailable", err)
			}
			if s := c.RedisStats(); s.Rejected == 0 || s.Timeouts != int64(faultOpts.BreakerFailures) {
				t.Errorf("with the breaker open: %d rejected, %d timeouts; want calls refused without reaching Redis", s.Rejected, s.Timeouts)
			}
			proxy.Resume()
			eventually(t, 10*time.Second, "a hit after the stall", func() bool {
				_, ok, _ := c.Get(bg, k)
				return ok
			})
			if s := c.RedisStats(); s.Breaker != redistier.BreakerClosed {
				t.Errorf("breaker %v after a successful probe, want closed", s.Breaker)
			}
		})
	}
}

// TestCutConnections: connections closed under the client and refused
// afterwards (a server gone from the network) are failures, not errors of
// Get, and the cache recovers when the network does.
func TestCutConnections(t *testing.T) {
	proxy, c, k := behindProxy(t, redistest.Start(t), true)
	proxy.Cut()
	if _, ok, err := c.Get(bg, k); ok || err != nil {
		t.Fatalf("Get with connections cut = hit %v, err %v; want a miss", ok, err)
	}
	if err := c.Put(bg, k, cachetest.ObjectN(1, 100)); !errors.Is(err, redistier.ErrUnavailable) {
		t.Fatalf("Put with connections cut = %v, want ErrUnavailable", err)
	}
	if s := c.RedisStats(); s.Errors < 2 || s.PutErrors != 1 {
		t.Errorf("stats with connections cut: %+v; want 2 errors, 1 put error", s)
	}
	proxy.Restore()
	eventually(t, 10*time.Second, "a hit once connections are restored", func() bool {
		_, ok, _ := c.Get(bg, k)
		return ok
	})
}

// behindProxy returns a cache with faultOpts that reaches srv through a
// new proxy, and the key of an object it stored there.
func behindProxy(t *testing.T, srv *redistest.Server, honours bool) (*redistest.Proxy, *redistier.Cache, progcache.Key) {
	t.Helper()
	proxy := redistest.NewProxy(t, srv.Addr)
	c := openCache(t, clientOf(t, proxy.Addr, honours), faultOpts)
	k := cachetest.KeyN(1)
	if err := c.Put(bg, k, cachetest.ObjectN(1, 100)); err != nil {
		t.Fatal(err)
	}
	return proxy, c, k
}
