package redistier_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/redistier"
	"github.com/accelkit/accelkit/progcache/redistier/redistest"
	"github.com/accelkit/accelkit/progcache/tiered"
)

// leaseOpts are short leases for tests: a heartbeat every 100 ms.
var leaseOpts = redistier.Options{Timeout: 50 * time.Millisecond, LeaseTTL: 300 * time.Millisecond, BreakerCooldown: 50 * time.Millisecond}

// twoProcesses returns two caches on one namespace, as two machines of a
// fleet would have, each with its own client.
func twoProcesses(t *testing.T, srv *redistest.Server, opts redistier.Options) (a, b *redistier.Cache) {
	opts.Namespace = freshNamespace(t)
	return openCache(t, srv.Client(t), opts), openCache(t, srv.Client(t), opts)
}

func TestLeaseAcquireContendRelease(t *testing.T) {
	srv := redistest.Start(t)
	a, b := twoProcesses(t, srv, leaseOpts)
	k := cachetest.KeyN(1)
	la, err := a.AcquireLease(bg, k)
	if err != nil || la == nil {
		t.Fatalf("Acquire of a free key = %v, %v; want the lease", la, err)
	}
	if la.Key() != k {
		t.Errorf("Lease.Key = %s, want %s", la.Key(), k)
	}
	for _, c := range []*redistier.Cache{a, b} {
		if l, err := c.AcquireLease(bg, k); l != nil || err != nil {
			t.Fatalf("Acquire of a held key = %v, %v; want (nil, nil)", l, err)
		}
	}
	// The tiered.Leaser form: a nil interface when held (a typed nil
	// inside it would read as taken to tiered.Cache).
	var leaser tiered.Leaser = a
	if l, err := leaser.Acquire(bg, k); l != nil || err != nil {
		t.Fatalf("Leaser.Acquire of a held key = %#v, %v; want a nil Lease and nil", l, err)
	}
	if l, err := leaser.Acquire(bg, cachetest.KeyN(3)); err != nil {
		t.Fatal(err)
	} else if _, ok := l.(*redistier.Lease); !ok {
		t.Fatalf("Leaser.Acquire of a free key = %#v; want a *redistier.Lease", l)
	} else if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
	if l, err := b.AcquireLease(bg, cachetest.KeyN(2)); l == nil || err != nil {
		t.Fatalf("Acquire of another key = %v, %v; want the lease", l, err)
	}
	if err := la.Release(bg); err != nil {
		t.Fatal(err)
	}
	if err := la.Release(bg); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	lb, err := b.AcquireLease(bg, k)
	if err != nil || lb == nil {
		t.Fatalf("Acquire after the holder's Release = %v, %v; want the lease at once", lb, err)
	}
	sa, sb := a.RedisStats(), b.RedisStats()
	if sa.LeasesAcquired != 2 || sa.LeasesContended != 2 || sa.LeasesReleased != 2 || sa.LeasesLost != 0 {
		t.Errorf("a's lease counters %+v: want 2 acquired, 2 contended, 2 released", sa)
	}
	if sb.LeasesAcquired != 2 || sb.LeasesContended != 1 {
		t.Errorf("b's lease counters %+v: want 2 acquired, 1 contended", sb)
	}
	// Close releases what is still held.
	b.Close()
	if l, err := a.AcquireLease(bg, k); l == nil || err != nil {
		t.Fatalf("Acquire after the holder's Close = %v, %v; want the lease", l, err)
	}
	if _, err := b.AcquireLease(bg, k); !errors.Is(err, progcache.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
}

// TestLeaseReleaseByNonHolder: a holder whose lease ran out and was taken
// over can release nothing of the new holder's.
func TestLeaseReleaseByNonHolder(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	a, b := twoProcesses(t, srv, redistier.Options{})
	k := cachetest.KeyN(1)
	la, err := a.AcquireLease(bg, k)
	if err != nil || la == nil {
		t.Fatal(la, err)
	}
	// The lease runs out (as if a's heartbeat had stalled past the TTL)
	// and b takes it.
	if err := raw.Del(bg, leaseKey(a.Namespace(), k)).Err(); err != nil {
		t.Fatal(err)
	}
	lb, err := b.AcquireLease(bg, k)
	if err != nil || lb == nil {
		t.Fatalf("Acquire of an expired lease = %v, %v; want it", lb, err)
	}
	if err := la.Release(bg); err != nil {
		t.Fatal(err)
	}
	if l, _ := a.AcquireLease(bg, k); l != nil {
		t.Fatal("the former holder's Release deleted the new holder's lease")
	}
	select {
	case <-la.Lost():
	default:
		t.Error("Lost() not closed after Release found the lease taken over")
	}
	if s := a.RedisStats(); s.LeasesLost != 1 || s.LeasesReleased != 0 {
		t.Errorf("former holder's counters: lost %d, released %d; want 1 and 0", s.LeasesLost, s.LeasesReleased)
	}
	if err := lb.Release(bg); err != nil {
		t.Fatal(err)
	}
	if s := b.RedisStats(); s.LeasesReleased != 1 {
		t.Errorf("the new holder's release counted %d, want 1", s.LeasesReleased)
	}
}

// TestLeaseHeartbeat: a held lease outlives several TTLs, and a heartbeat
// that finds another's token there gives the lease up as lost.
func TestLeaseHeartbeat(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	a, b := twoProcesses(t, srv, leaseOpts)
	k := cachetest.KeyN(1)
	la, err := a.AcquireLease(bg, k)
	if err != nil || la == nil {
		t.Fatal(la, err)
	}
	start := time.Now()
	for time.Since(start) < 4*leaseOpts.LeaseTTL {
		if l, err := b.AcquireLease(bg, k); l != nil || err != nil {
			t.Fatalf("Acquire %v after the holder took it (TTL %v) = %v, %v; the heartbeat must keep it", time.Since(start), leaseOpts.LeaseTTL, l, err)
		}
		time.Sleep(leaseOpts.LeaseTTL / 5)
	}
	// Another token in its place: the next heartbeat finds it.
	if err := raw.Set(bg, leaseKey(a.Namespace(), k), "someone else", 0).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-la.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat did not notice the lease taken over")
	}
	if v, _ := raw.Get(bg, leaseKey(a.Namespace(), k)).Result(); v != "someone else" {
		t.Errorf("the lost holder's heartbeat changed the new holder's lease to %q", v)
	}
	if ttl, _ := raw.PTTL(bg, leaseKey(a.Namespace(), k)).Result(); ttl != -1 {
		t.Errorf("the lost holder's heartbeat set an expiry (%v) on the new holder's lease", ttl)
	}
}

// TestLeaseLostWhenCutOff: a holder that cannot reach Redis stops
// extending its lease; another process takes it after the TTL, and the
// holder's Lost channel closes.
func TestLeaseLostWhenCutOff(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.NewProxy(t, srv.Addr)
	opts := leaseOpts
	opts.Namespace = freshNamespace(t)
	holder := openCache(t, clientOf(t, proxy.Addr, false), opts)
	other := openCache(t, srv.Client(t), opts)
	k := cachetest.KeyN(1)
	l, err := holder.AcquireLease(bg, k)
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	proxy.Stall()
	cut := time.Now()
	var took time.Duration
	eventually(t, 10*time.Second, "another process takes the lease of a holder cut off from Redis", func() bool {
		l, err := other.AcquireLease(bg, k)
		if l != nil {
			took = time.Since(cut)
		}
		return l != nil && err == nil
	})
	t.Logf("lease taken over %v after its holder was cut off (LeaseTTL %v)", took, opts.LeaseTTL)
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost() not closed for a holder cut off past its TTL")
	}
	s := holder.RedisStats()
	if s.HeartbeatFailures == 0 || s.LeasesLost != 1 {
		t.Errorf("holder's counters: heartbeat failures %d, lost %d; want > 0 and 1", s.HeartbeatFailures, s.LeasesLost)
	}
	proxy.Resume()
	// Its late Release must not free the new holder's lease.
	eventually(t, 10*time.Second, "the holder's release reaches Redis", func() bool {
		return l.Release(bg) == nil
	})
	if l2, _ := holder.AcquireLease(bg, k); l2 != nil {
		t.Error("the cut-off holder's Release freed the new holder's lease")
	}
}

// TestLeaseStress: 32 goroutines on each of 4 caches (four processes'
// worth of clients) take and give back one key's lease; never two at
// once.
func TestLeaseStress(t *testing.T) {
	srv := redistest.Start(t)
	// 128 clients on two cores, beside other tests: a patient timeout, as
	// a failed Acquire is a failure here.
	opts := redistier.Options{Namespace: freshNamespace(t), Timeout: 2 * time.Second}
	var holders, taken atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4*32)
	for range 4 {
		c := openCache(t, srv.Client(t), opts)
		for range 32 {
			wg.Go(func() {
				for range 20 {
					l, err := c.AcquireLease(bg, cachetest.KeyN(7))
					if err != nil {
						errs <- err
						return
					}
					if l == nil {
						continue
					}
					if holders.Add(1) != 1 {
						errs <- errors.New("two holders of one lease at once")
					}
					taken.Add(1)
					holders.Add(-1)
					if err := l.Release(bg); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if taken.Load() == 0 {
		t.Error("no goroutine ever took the lease")
	}
}

// Environment of the lease-holder process of TestLeaseHolderKilled.
const (
	holderAddrEnv = "REDISTIER_TEST_HOLDER_ADDR"
	holderNSEnv   = "REDISTIER_TEST_HOLDER_NS"
)

// TestLeaseHolderKilled starts another process that takes a lease and
// keeps it by heartbeat, SIGKILLs it, and measures how long until this
// process takes the lease over: at most LeaseTTL after the holder's last
// heartbeat.
func TestLeaseHolderKilled(t *testing.T) {
	t.Parallel() // mostly waiting: for a failover, a cluster, a lease to expire
	if addr := os.Getenv(holderAddrEnv); addr != "" {
		holdLease(t, addr, os.Getenv(holderNSEnv))
		return
	}
	srv := redistest.Start(t)
	opts := leaseOpts
	opts.LeaseTTL = 600 * time.Millisecond
	opts.Namespace = freshNamespace(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseHolderKilled$")
	cmd.Env = append(os.Environ(), holderAddrEnv+"="+srv.Addr, holderNSEnv+"="+opts.Namespace)
	stdin, _ := cmd.StdinPipe() // the holder exits when it closes: no orphan if this test dies
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "HELD\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the holder process said %q, %v; want HELD", line, err)
	}
	c := openCache(t, srv.Client(t), opts)
	k := cachetest.KeyN(1)
	time.Sleep(2 * opts.LeaseTTL) // past its first expiry: the heartbeat keeps it
	if l, err := c.AcquireLease(bg, k); l != nil || err != nil {
		t.Fatalf("Acquire while another process holds the lease = %v, %v; want contended", l, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	var l *redistier.Lease
	eventually(t, 10*time.Second, "the lease of a killed holder is taken over", func() bool {
		l, err = c.AcquireLease(bg, k)
		return l != nil && err == nil
	})
	t.Logf("lease of a SIGKILLed holder taken over %v after the kill (LeaseTTL %v, heartbeat every %v)", time.Since(killed), opts.LeaseTTL, opts.LeaseTTL/3)
	if err := l.Release(bg); err != nil {
		t.Fatal(err)
	}
}

// holdLease is the holder process: it takes the lease on KeyN(1), says
// HELD, and keeps it until killed or until its standard input closes.
func holdLease(t *testing.T, addr, ns string) {
	opts := leaseOpts
	opts.LeaseTTL = 600 * time.Millisecond
	opts.Namespace = ns
	c := openCache(t, clientOf(t, addr, false), opts)
	l, err := c.AcquireLease(bg, cachetest.KeyN(1))
	if l == nil || err != nil {
		t.Fatalf("holder: Acquire = %v, %v", l, err)
	}
	fmt.Println("HELD")
	io.Copy(io.Discard, os.Stdin)
}

// TestStaleLeaseTakenOver: a lease planted without an expiry, or with more
// time left than MaxLeaseTTL, which no holder sets, is taken over by the
// next Acquire instead of making every compile of its key wait; a live
// holder's lease is not.
func TestStaleLeaseTakenOver(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	c := openCache(t, clientOf(t, srv.Addr, true), redistier.Options{})
	for i, plant := range []func(key string) error{
		func(key string) error { return raw.Set(bg, key, "planted", 0).Err() },
		func(key string) error { return raw.Set(bg, key, "planted", 24*time.Hour).Err() },
	} {
		k := cachetest.KeyN(100 + i)
		key := leaseKey(c.Namespace(), k)
		if err := plant(key); err != nil {
			t.Fatal(err)
		}
		l, err := c.AcquireLease(bg, k)
		if err != nil || l == nil {
			t.Fatalf("planted lease %d: AcquireLease = %v, %v; want the lease taken over", i, l, err)
		}
		ttl, _ := raw.PTTL(bg, key).Result()
		if ttl <= 0 || ttl > redistier.DefaultLeaseTTL {
			t.Errorf("planted lease %d after the takeover: PTTL %v, want within LeaseTTL", i, ttl)
		}
		if err := l.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
	if s := c.RedisStats(); s.LeasesStale != 2 || s.LeasesAcquired != 2 || s.LeasesLost != 0 {
		t.Errorf("after two takeovers: %+v", s)
	}
	// A live holder keeps its lease.
	holder := openCache(t, clientOf(t, srv.Addr, true), redistier.Options{Namespace: c.Namespace()})
	l, err := holder.AcquireLease(bg, cachetest.KeyN(200))
	if err != nil || l == nil {
		t.Fatal(l, err)
	}
	defer l.Release(bg)
	if other, err := c.AcquireLease(bg, cachetest.KeyN(200)); other != nil || err != nil {
		t.Errorf("AcquireLease of a live holder's lease = %v, %v; want nil, nil", other, err)
	}
}
