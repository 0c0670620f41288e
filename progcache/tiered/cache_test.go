package tiered_test

// Cache: conformance over two pairs of tiers, the traffic between the
// tiers, failing open, the remote put queue, and compile-once across
// "machines": Cache values with separate local caches sharing one remote
// memory cache and one lease service, both fakes written here.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
	"github.com/accelkit/accelkit/progcache/filestream"
	"github.com/accelkit/accelkit/progcache/tiered"
)

func TestTieredConformance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local func(t *testing.T, maxBytes int64) progcache.Cache
	}{
		{"memory", func(t *testing.T, maxBytes int64) progcache.Cache { return newMemory(t, maxBytes) }},
		{"filestream", func(t *testing.T, maxBytes int64) progcache.Cache {
			c, err := filestream.Open(t.TempDir(), filestream.Options{MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cachetest.Run(t, cachetest.Backend{
				Open: func(t *testing.T, maxBytes int64) progcache.Cache {
					c, err := tiered.New(tc.local(t, maxBytes), newMemory(t, maxBytes), tiered.Options{})
					if err != nil {
						t.Fatal(err)
					}
					return c
				},
				Ops: 300,
			})
		})
	}
}

func newMemory(t testing.TB, maxBytes int64) *progcache.Memory {
	c, err := progcache.NewMemory(progcache.MemoryOptions{MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var errRemoteDown = errors.New("fake remote: down")

// fakeRemote is a remote tier over a store that several Cache values may
// share (machines): it fails every call while fail is set, and its Puts
// wait on gate (or their ctx) when gate is set, announcing their key on
// started first. Its Close leaves the store open.
type fakeRemote struct {
	progcache.Cache
	fail    atomic.Bool
	gate    chan struct{}      // set before use
	started chan progcache.Key // set before use
}

func (r *fakeRemote) Get(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	if r.fail.Load() {
		return progcache.Object{}, false, errRemoteDown
	}
	return r.Cache.Get(ctx, k)
}

func (r *fakeRemote) Put(ctx context.Context, k progcache.Key, obj progcache.Object) error {
	if r.started != nil {
		r.started <- k
	}
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if r.fail.Load() {
		return errRemoteDown
	}
	return r.Cache.Put(ctx, k, obj)
}

func (r *fakeRemote) Delete(ctx context.Context, k progcache.Key) error {
	if r.fail.Load() {
		return errRemoteDown
	}
	return r.Cache.Delete(ctx, k)
}

func (r *fakeRemote) Close() error { return nil }

// fakeLeaser is a lease service shared by machines: a lease is held until
// released or until it expires (expire: as it does once its holder died
// and stopped keeping it alive). While fail is set, Acquire cannot be
// asked.
type fakeLeaser struct {
	fail atomic.Bool

	mu   sync.Mutex
	held map[progcache.Key]*fakeLease
}

type fakeLease struct {
	l       *fakeLeaser
	k       progcache.Key
	expired bool
}

func newFakeLeaser() *fakeLeaser {
	return &fakeLeaser{held: map[progcache.Key]*fakeLease{}}
}

func (l *fakeLeaser) Acquire(ctx context.Context, k progcache.Key) (tiered.Lease, error) {
	if l.fail.Load() {
		return nil, errors.New("fake leaser: unreachable")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.held[k]; cur != nil && !cur.expired {
		return nil, nil
	}
	le := &fakeLease{l: l, k: k}
	l.held[k] = le
	return le, nil
}

// Release removes the lease only if it is still the one held: a holder
// whose lease expired and was taken over leaves the new holder's.
func (le *fakeLease) Release(ctx context.Context) error {
	le.l.mu.Lock()
	defer le.l.mu.Unlock()
	if le.l.held[le.k] == le {
		delete(le.l.held, le.k)
	}
	return nil
}

// expire ends k's lease, as its expiry does once the holder died.
func (l *fakeLeaser) expire(k progcache.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[k].expired = true
}

// plant makes another machine, alive and never done, hold k's lease.
func (l *fakeLeaser) plant(k progcache.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[k] = &fakeLease{l: l, k: k}
}

// newTiered returns a Cache over local and a fakeRemote over store,
// closed when t ends.
func newTiered(t *testing.T, local progcache.Cache, store progcache.Cache, opts tiered.Options) (*tiered.Cache, *fakeRemote) {
	t.Helper()
	r := &fakeRemote{Cache: store}
	c, err := tiered.New(local, r, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, r
}

func TestTieredOptions(t *testing.T) {
	m := newMemory(t, 0)
	for _, tc := range []struct {
		opts tiered.Options
		want string
	}{
		{tiered.Options{QueueLen: -1}, "Options.QueueLen -1: want 0 (DefaultQueueLen) or a positive count"},
		{tiered.Options{RemotePutWorkers: -2}, "Options.RemotePutWorkers -2"},
		{tiered.Options{DrainTimeout: -time.Second}, "Options.DrainTimeout -1s: want 0 (DefaultDrainTimeout)"},
		{tiered.Options{LeaseWait: -time.Millisecond}, "Options.LeaseWait -1ms"},
	} {
		_, err := tiered.New(m, m, tc.opts)
		if !errors.Is(err, progcache.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want ErrInvalidConfig saying %q", tc.opts, err, tc.want)
		}
	}
	if _, err := tiered.New(nil, m, tiered.Options{}); !errors.Is(err, progcache.ErrInvalidConfig) {
		t.Errorf("New with a nil local tier = %v, want ErrInvalidConfig", err)
	}
	if _, err := tiered.New(m, nil, tiered.Options{}); !errors.Is(err, progcache.ErrInvalidConfig) {
		t.Errorf("New with a nil remote tier = %v, want ErrInvalidConfig", err)
	}
}

// A remote hit is served and backfilled, so the next lookup is local; a
// local tier that refuses the backfill still serves the hit. Get and View
// count the same way.
func TestTieredBackfill(t *testing.T) {
	ctx := context.Background()
	store := newMemory(t, 0)
	obj := cachetest.ObjectN(1, 1000)
	store.Put(ctx, cachetest.KeyN(1), obj)
	local := newMemory(t, 0)
	c, _ := newTiered(t, local, store, tiered.Options{})

	got, ok, err := c.Get(ctx, cachetest.KeyN(1))
	if !ok || err != nil || !got.Equal(obj) {
		t.Fatalf("Get of a remote entry = hit %v, %v; want the remote object", ok, err)
	}
	if !local.Contains(cachetest.KeyN(1)) {
		t.Fatal("a remote hit was not backfilled into the local tier")
	}
	if _, ok, _ := c.Get(ctx, cachetest.KeyN(1)); !ok {
		t.Fatal("Get after the backfill missed")
	}
	if _, ok, _ := c.Get(ctx, cachetest.KeyN(2)); ok {
		t.Fatal("Get of a key in neither tier hit")
	}
	s := c.TierStats()
	if s.LocalHits != 1 || s.RemoteHits != 1 || s.Misses != 1 || s.Backfills != 1 || s.BackfillFailed != 0 {
		t.Errorf("TierStats after a remote hit, a local hit and a miss: %+v", s)
	}
	if st := c.Stats(); st.Hits != 2 || st.Misses != 1 || st.Entries != 1 {
		t.Errorf("Stats = %+v; want 2 hits, 1 miss, the local tier's 1 entry", st)
	}

	// A local tier too small for the object: served, not stored.
	store.Put(ctx, cachetest.KeyN(3), cachetest.ObjectN(3, 4000))
	small := newMemory(t, 100)
	c2, _ := newTiered(t, small, store, tiered.Options{})
	calls := 0
	ok, err = c2.View(ctx, cachetest.KeyN(3), func(v progcache.View) error {
		calls++
		if len(v.Code()) != 4000 {
			return fmt.Errorf("view shows %d code bytes, want 4000", len(v.Code()))
		}
		return nil
	})
	if !ok || err != nil || calls != 1 {
		t.Fatalf("View of a remote entry = hit %v, %v, fn called %d times", ok, err, calls)
	}
	if s := c2.TierStats(); s.RemoteHits != 1 || s.BackfillFailed != 1 || s.Local.TooLarge != 1 {
		t.Errorf("TierStats after a backfill the local tier refused: %+v", s)
	}
}

// A remote tier that fails never fails a lookup, a put or a compile.
func TestTieredFailOpen(t *testing.T) {
	ctx := context.Background()
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("SyncRemotePut=%v", sync), func(t *testing.T) {
			leaser := newFakeLeaser()
			c, r := newTiered(t, newMemory(t, 0), newMemory(t, 0), tiered.Options{SyncRemotePut: sync, Leaser: leaser})
			r.fail.Store(true)
			if _, ok, err := c.Get(ctx, cachetest.KeyN(1)); ok || err != nil {
				t.Fatalf("Get with the remote tier down = hit %v, %v; want a miss without error", ok, err)
			}
			if err := c.Put(ctx, cachetest.KeyN(2), cachetest.ObjectN(2, 10)); err != nil {
				t.Fatalf("Put with the remote tier down = %v, want nil", err)
			}
			compiles := 0
			obj, err := progcache.GetOrCompile(ctx, c, cachetest.KeyN(3), func(context.Context) (progcache.Object, error) {
				compiles++
				return cachetest.ObjectN(3, 10), nil
			})
			if err != nil || compiles != 1 || !obj.Equal(cachetest.ObjectN(3, 10)) {
				t.Fatalf("GetOrCompile with the remote tier down = %v after %d compiles", err, compiles)
			}
			// The lease service down too: compiled without a lease.
			leaser.fail.Store(true)
			if _, err := progcache.GetOrCompile(ctx, c, cachetest.KeyN(4), func(context.Context) (progcache.Object, error) {
				compiles++
				return cachetest.ObjectN(4, 10), nil
			}); err != nil || compiles != 2 {
				t.Fatalf("GetOrCompile with the lease service down = %v after %d compiles", err, compiles)
			}
			if st := c.Stats(); st.Puts != 3 || st.Entries != 3 {
				t.Errorf("Stats = %+v; want 3 puts and 3 local entries", st)
			}
			if err := c.Close(); err != nil { // drains the queue
				t.Fatal(err)
			}
			s := c.TierStats()
			// Lookups: Get, GetOrCompile's two Gets and its peeks (with
			// the lease taken, and without).
			if s.RemoteErrors < 3 || s.Misses != 3 {
				t.Errorf("remote errors %d, misses %d; want at least 3 and 3", s.RemoteErrors, s.Misses)
			}
			// Put and two compiles' puts; the compile under a lease put
			// synchronously.
			if s.RemotePutFailed != 3 || s.RemotePutDone != 0 {
				t.Errorf("remote puts failed %d, done %d; want 3 and 0", s.RemotePutFailed, s.RemotePutDone)
			}
			if s.LeaseAcquired != 1 || s.LeaseAcquireErrors != 1 {
				t.Errorf("leases acquired %d, acquire errors %d; want 1 and 1", s.LeaseAcquired, s.LeaseAcquireErrors)
			}
		})
	}
}

// Put goes to the remote tier through the queue, or before it returns
// with SyncRemotePut; Close drains the queue.
func TestTieredRemotePut(t *testing.T) {
	ctx := context.Background()
	store := newMemory(t, 0)
	c, _ := newTiered(t, newMemory(t, 0), store, tiered.Options{SyncRemotePut: true})
	c.Put(ctx, cachetest.KeyN(1), cachetest.ObjectN(1, 10))
	if !store.Contains(cachetest.KeyN(1)) {
		t.Fatal("with SyncRemotePut, the remote tier lacks the entry when Put returns")
	}

	c, _ = newTiered(t, newMemory(t, 0), store, tiered.Options{RemotePutWorkers: 3})
	const n = 40
	for i := range n {
		obj := cachetest.ObjectN(100+i, 100)
		if err := c.Put(ctx, cachetest.KeyN(100+i), obj); err != nil {
			t.Fatal(err)
		}
		obj.Code[0]++ // Cache keeps its own copy for the queue
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		got, ok, _ := store.Get(ctx, cachetest.KeyN(100+i))
		if !ok || !got.Equal(cachetest.ObjectN(100+i, 100)) {
			t.Fatalf("remote entry %d after Close: hit %v, equal %v; Close must drain the queue", i, ok, got.Equal(cachetest.ObjectN(100+i, 100)))
		}
	}
	if s := c.TierStats(); s.RemotePutQueued != n || s.RemotePutDone != n || s.QueueLen != 0 {
		t.Errorf("TierStats after %d puts and Close: %+v", n, s)
	}
}

// A full queue drops the remote put rather than wait; Close's drain is
// bounded, and Delete and Clear take queued puts out of the queue.
func TestTieredQueue(t *testing.T) {
	ctx := context.Background()
	store := newMemory(t, 0)
	c, r := newTiered(t, newMemory(t, 0), store, tiered.Options{QueueLen: 3, RemotePutWorkers: 1, DrainTimeout: 20 * time.Millisecond})
	r.gate, r.started = make(chan struct{}), make(chan progcache.Key, 1)
	put := func(n int) {
		t.Helper()
		if err := c.Put(ctx, cachetest.KeyN(n), cachetest.ObjectN(n, 10)); err != nil {
			t.Fatal(err)
		}
	}
	put(1)
	<-r.started // the worker holds key 1's put at the gate
	for n := 2; n <= 5; n++ {
		put(n) // 2, 3, 4 queued; 5 dropped
	}
	s := c.TierStats()
	if s.RemotePutQueued != 4 || s.RemotePutDropped != 1 || s.QueueLen != 3 {
		t.Fatalf("after 5 puts into a queue of 3 behind a stalled put: queued %d, dropped %d, queue %d; want 4, 1, 3", s.RemotePutQueued, s.RemotePutDropped, s.QueueLen)
	}
	if n, _ := c.Len(ctx); n != 5 {
		t.Errorf("Len = %d; every put is in the local tier, want 5", n)
	}

	if err := c.Delete(ctx, cachetest.KeyN(2)); err != nil {
		t.Fatal(err)
	}
	if s := c.TierStats(); s.RemotePutCancelled != 1 || s.QueueLen != 2 {
		t.Errorf("Delete of a queued key: cancelled %d, queue %d; want 1 and 2", s.RemotePutCancelled, s.QueueLen)
	}
	// Key 1's put is under way: Delete waits for it, here until its
	// context ends.
	dctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := c.Delete(dctx, cachetest.KeyN(1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Delete of a key whose remote put is under way = %v; want it to wait (DeadlineExceeded)", err)
	}

	// Close: the stalled put is cancelled and the queued two dropped.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	s = c.TierStats()
	if s.RemotePutDropped != 3 || s.RemotePutFailed != 1 || s.RemotePutDone != 0 || s.QueueLen != 0 {
		t.Errorf("after Close past its drain time: dropped %d, failed %d, done %d, queue %d; want 3, 1, 0, 0", s.RemotePutDropped, s.RemotePutFailed, s.RemotePutDone, s.QueueLen)
	}
	if n, _ := store.Len(ctx); n != 0 {
		t.Errorf("the remote tier holds %d entries; every put was stalled, cancelled or dropped", n)
	}

	// Delete and Clear: once the put under way ends, what they removed
	// does not come back from the remote tier.
	c, r = newTiered(t, newMemory(t, 0), store, tiered.Options{RemotePutWorkers: 1})
	r.gate, r.started = make(chan struct{}), make(chan progcache.Key, 3)
	put(1)
	<-r.started
	put(2)
	put(3)
	go func() { close(r.gate) }()
	if err := c.Delete(ctx, cachetest.KeyN(1)); err != nil {
		t.Fatal(err)
	}
	if err := c.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		if _, ok, _ := c.Get(ctx, cachetest.KeyN(n)); ok {
			t.Errorf("key %d found after Delete and Clear", n)
		}
	}
}

// compileOnceMachines runs machines Cache values, each with its own local
// cache from local, sharing one remote memory cache and one lease
// service, and goroutines callers on each missing one key at once. The
// compile holds the lease until every other machine waits for it.
func TestTieredCompileOnceAcrossMachines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local func(t *testing.T) progcache.Cache
	}{
		{"memory", func(t *testing.T) progcache.Cache { return newMemory(t, 0) }},
		{"filestream", func(t *testing.T) progcache.Cache {
			c, err := filestream.Open(t.TempDir(), filestream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const machines, callers = 4, 8
			ctx := context.Background()
			store := newMemory(t, 0)
			leaser := newFakeLeaser()
			allWaiting := make(chan struct{})
			var waiting atomic.Int32
			cs := make([]*tiered.Cache, machines)
			for i := range cs {
				cs[i], _ = newTiered(t, tc.local(t), store, tiered.Options{Leaser: leaser})
				tiered.SetLeaseWaiting(cs[i], func(progcache.Key) {
					if waiting.Add(1) == machines-1 {
						close(allWaiting)
					}
				})
			}
			var compiles atomic.Int32
			want := cachetest.ObjectN(7, 3000)
			compile := func(ctx context.Context) (progcache.Object, error) {
				compiles.Add(1)
				select {
				case <-allWaiting:
					return want, nil
				case <-time.After(10 * time.Second): // a guard against a hang, not a timing check
					return progcache.Object{}, errors.New("the other machines never waited for the lease")
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, machines*callers)
			for _, c := range cs {
				for range callers {
					wg.Go(func() {
						obj, err := progcache.GetOrCompile(ctx, c, cachetest.KeyN(7), compile)
						if err != nil || !obj.Equal(want) {
							errs <- fmt.Errorf("GetOrCompile = %w, equal %v", err, obj.Equal(want))
						}
					})
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if n := compiles.Load(); n != 1 {
				t.Fatalf("%d machines x %d callers missing one key compiled %d times, want 1", machines, callers, n)
			}
			var acquired, waited, ended int64
			for _, c := range cs {
				s := c.TierStats()
				acquired += s.LeaseAcquired
				waited += s.LeaseWaited
				ended += s.LeaseWaitHits + s.LeaseTakenOver
				if n, err := c.Local().Len(ctx); n != 1 || err != nil {
					t.Errorf("a machine's local tier holds %d entries (%v), want the one backfilled or compiled", n, err)
				}
			}
			if acquired != 1 || waited != machines-1 || ended != machines-1 {
				t.Errorf("leases acquired %d, waited %d, waits ended by the entry or a takeover %d; want 1, %d, %d", acquired, waited, ended, machines-1, machines-1)
			}
		})
	}
}

// A holder that dies mid-compile (nothing keeps its lease alive) is taken
// over once its lease expires, and the waiter compiles; the dead holder's
// late Release leaves the new holder's lease alone.
func TestTieredLeaseTakeover(t *testing.T) {
	ctx := context.Background()
	store := newMemory(t, 0)
	leaser := newFakeLeaser()
	holder, _ := newTiered(t, newMemory(t, 0), store, tiered.Options{Leaser: leaser})
	waiter, _ := newTiered(t, newMemory(t, 0), store, tiered.Options{Leaser: leaser})
	k := cachetest.KeyN(1)

	hctx, kill := context.WithCancel(ctx)
	holding := make(chan struct{})
	holderDone := make(chan error, 1)
	go func() {
		_, err := progcache.GetOrCompile(hctx, holder, k, func(ctx context.Context) (progcache.Object, error) {
			close(holding)
			<-ctx.Done() // hung: only its kill ends it
			return progcache.Object{}, ctx.Err()
		})
		holderDone <- err
	}()
	<-holding
	// Once the waiter waits, the holder's lease runs out.
	tiered.SetLeaseWaiting(waiter, leaser.expire)
	compiles := 0
	obj, err := progcache.GetOrCompile(ctx, waiter, k, func(context.Context) (progcache.Object, error) {
		compiles++
		return cachetest.ObjectN(1, 10), nil
	})
	if err != nil || compiles != 1 || !obj.Equal(cachetest.ObjectN(1, 10)) {
		t.Fatalf("waiter of a dead holder: %v after %d compiles", err, compiles)
	}
	if s := waiter.TierStats(); s.LeaseWaited != 1 || s.LeaseTakenOver != 1 || s.LeaseWaitTimeouts != 0 {
		t.Errorf("waiter's TierStats: %+v; want one wait ended by a takeover", s)
	}
	if !store.Contains(k) {
		t.Error("the waiter that took over did not store its object in the remote tier")
	}

	// A third machine holds the lease now; the dead holder's Release,
	// when it finally returns, must not free it.
	leaser.plant(k)
	kill()
	if err := <-holderDone; !errors.Is(err, context.Canceled) {
		t.Errorf("the killed holder's GetOrCompile = %v, want context.Canceled", err)
	}
	if l, err := leaser.Acquire(ctx, k); l != nil || err != nil {
		t.Error("the dead holder's Release freed another holder's lease")
	}
}

// A waiter never waits past LeaseWait: then it compiles without the
// lease. Close ends a wait with ErrClosed.
func TestTieredLeaseWait(t *testing.T) {
	ctx := context.Background()
	leaser := newFakeLeaser()
	k := cachetest.KeyN(1)
	leaser.plant(k) // a live holder that never finishes
	c, _ := newTiered(t, newMemory(t, 0), newMemory(t, 0), tiered.Options{Leaser: leaser, LeaseWait: 20 * time.Millisecond})
	compiles := 0
	if _, err := progcache.GetOrCompile(ctx, c, k, func(context.Context) (progcache.Object, error) {
		compiles++
		return cachetest.ObjectN(1, 10), nil
	}); err != nil || compiles != 1 {
		t.Fatalf("waiter past LeaseWait: %v after %d compiles; want it to compile", err, compiles)
	}
	if s := c.TierStats(); s.LeaseWaited != 1 || s.LeaseWaitTimeouts != 1 || s.RemotePutQueued != 1 {
		t.Errorf("TierStats: %+v; want one wait, timed out, and the remote put queued (no lease held)", s)
	}

	c, _ = newTiered(t, newMemory(t, 0), newMemory(t, 0), tiered.Options{Leaser: leaser})
	waitingNow := make(chan struct{})
	tiered.SetLeaseWaiting(c, func(progcache.Key) { close(waitingNow) })
	errc := make(chan error, 1)
	go func() {
		_, err := progcache.GetOrCompile(ctx, c, k, func(context.Context) (progcache.Object, error) {
			return progcache.Object{}, errors.New("must not compile")
		})
		errc <- err
	}()
	select {
	case <-waitingNow:
	case err := <-errc:
		t.Fatalf("GetOrCompile of a key whose lease is held returned %v without waiting", err)
	}
	c.Close()
	if err := <-errc; !errors.Is(err, progcache.ErrClosed) {
		t.Errorf("a lease wait when the cache closes = %v, want ErrClosed", err)
	}
}

// Stress under -race: every method, GetOrCompile with leases included, on
// two machines sharing a remote tier, while one machine closes. Each call
// works or fails with ErrClosed.
func TestTieredStress(t *testing.T) {
	ctx := context.Background()
	store := newMemory(t, 0)
	leaser := newFakeLeaser()
	a, _ := newTiered(t, newMemory(t, 64<<10), store, tiered.Options{Leaser: leaser, QueueLen: 8, RemotePutWorkers: 2})
	b, _ := newTiered(t, newMemory(t, 0), store, tiered.Options{Leaser: leaser, LeaseWait: 50 * time.Millisecond})
	const keys, ops = 8, 200
	var done atomic.Int32 // operations finished, on both machines
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	report := func(what string, err error) bool {
		if err == nil {
			return true
		}
		if !errors.Is(err, progcache.ErrClosed) {
			select {
			case errs <- fmt.Errorf("%s: %w", what, err):
			default:
			}
		}
		return false
	}
	for w := range 6 {
		c := a
		if w%2 == 1 {
			c = b
		}
		wg.Go(func() {
			for i := range ops {
				n := (i*7 + w) % keys
				k, want := cachetest.KeyN(n), cachetest.ObjectN(n, 1000+n)
				var err error
				switch i % 6 {
				case 0:
					err = c.Put(ctx, k, want)
				case 1:
					var obj progcache.Object
					var ok bool
					if obj, ok, err = c.Get(ctx, k); ok && !obj.Equal(want) {
						err = fmt.Errorf("Get of key %d returned another object", n)
					}
				case 2:
					_, err = c.View(ctx, k, func(v progcache.View) error {
						if len(v.Code()) != len(want.Code) {
							return fmt.Errorf("View of key %d shows %d code bytes, want %d", n, len(v.Code()), len(want.Code))
						}
						return nil
					})
				case 3, 4:
					var obj progcache.Object
					obj, err = progcache.GetOrCompile(ctx, c, k, func(context.Context) (progcache.Object, error) { return want, nil })
					if err == nil && !obj.Equal(want) {
						err = fmt.Errorf("GetOrCompile of key %d returned another object", n)
					}
				case 5:
					if i%30 == 5 {
						err = c.Delete(ctx, k)
					} else {
						_, err = c.Len(ctx)
					}
				}
				_ = c.TierStats()
				done.Add(1)
				if !report(fmt.Sprintf("op %d", i%6), err) && errors.Is(err, progcache.ErrClosed) {
					return
				}
			}
		})
	}
	wg.Go(func() {
		for done.Load() < 300 { // close in mid-run: some work done, most to come
			runtime.Gosched()
		}
		report("Close", a.Close())
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, _, err := a.Get(ctx, cachetest.KeyN(1)); !errors.Is(err, progcache.ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
}

// batchRemote is a fakeRemote that is a Prefetcher, recording the keys of
// each Prefetch call.
type batchRemote struct {
	*fakeRemote
	calls [][]progcache.Key
}

func (r *batchRemote) Prefetch(ctx context.Context, keys []progcache.Key, fn func(progcache.Key, progcache.Object) error) (int, error) {
	r.calls = append(r.calls, keys)
	if r.fail.Load() {
		return 0, errRemoteDown
	}
	n := 0
	for _, k := range keys {
		obj, ok, err := r.Cache.Get(ctx, k)
		if err != nil {
			return n, err
		}
		if !ok {
			continue
		}
		n++
		if err := fn(k, obj); err != nil {
			return n, err
		}
	}
	return n, nil
}

// A warm start fetches what the local tier lacks, in one batch when the
// remote tier is a Prefetcher and key by key otherwise.
func TestTieredPrefetch(t *testing.T) {
	ctx := context.Background()
	store := newMemory(t, 0)
	var keys []progcache.Key
	for i := range 12 {
		keys = append(keys, cachetest.KeyN(i))
		if i < 10 {
			store.Put(ctx, cachetest.KeyN(i), cachetest.ObjectN(i, 100))
		}
	}
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("prefetcher=%v", batch), func(t *testing.T) {
			local := newMemory(t, 0)
			local.Put(ctx, keys[0], cachetest.ObjectN(0, 100))
			fr := &fakeRemote{Cache: store}
			var remote progcache.Cache = fr
			br := &batchRemote{fakeRemote: fr}
			if batch {
				remote = br
			}
			c, err := tiered.New(local, remote, tiered.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			n, err := c.Prefetch(ctx, keys)
			if n != 9 || err != nil {
				t.Fatalf("Prefetch of 12 keys, 1 local, 9 more remote = %d, %v; want 9, nil", n, err)
			}
			for i := range 10 {
				if !local.Contains(keys[i]) {
					t.Errorf("key %d not in the local tier after Prefetch", i)
				}
			}
			if batch && (len(br.calls) != 1 || len(br.calls[0]) != 11) {
				t.Errorf("Prefetcher calls %v; want one, of the 11 keys the local tier lacks", br.calls)
			}
			s := c.TierStats()
			if s.Backfills != 9 || s.LocalHits+s.RemoteHits+s.Misses != 0 {
				t.Errorf("TierStats after Prefetch %+v: want 9 backfills and no lookups", s)
			}

			fr.fail.Store(true)
			n, err = c.Prefetch(ctx, []progcache.Key{keys[0], keys[11]})
			if n != 0 || !errors.Is(err, errRemoteDown) {
				t.Errorf("Prefetch with the remote tier down = %d, %v; want 0 and its error", n, err)
			}
			if s := c.TierStats(); s.RemoteErrors != 1 {
				t.Errorf("RemoteErrors %d after a failed Prefetch, want 1", s.RemoteErrors)
			}
			if _, ok, err := c.Get(ctx, keys[5]); !ok || err != nil {
				t.Errorf("Get of a prefetched key with the remote tier down = %v, %v; want a local hit", ok, err)
			}
		})
	}
}
