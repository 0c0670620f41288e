package tiered

// Cache: a local cache in front of a remote one shared by machines.
//
// Lookups go to the local tier first and to the remote tier on a local
// miss; a remote hit is copied into the local tier (backfilled), so the
// next lookup of the key on this machine is local. Puts go to the local
// tier at once and to the remote tier through a bounded queue drained by
// worker goroutines (queue.go), so a slow remote never holds up a
// compile. The remote tier fails open: its errors are counted and turn
// into misses, never into a failed lookup or compile. GetOrCompile takes
// the local tier's cross-process lock and then, with a Leaser, a lease
// shared by the machines (compile.go).
//
// This file is the public surface.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

const (
	// DefaultQueueLen is how many remote puts a tiered cache queues
	// when Options.QueueLen is 0.
	DefaultQueueLen = 256
	// DefaultRemotePutWorkers is how many goroutines drain the queue when
	// Options.RemotePutWorkers is 0: puts are network round trips,
	// so a few overlap them.
	DefaultRemotePutWorkers = 4
	// DefaultDrainTimeout is how long Close lets queued remote puts
	// finish when Options.DrainTimeout is 0.
	DefaultDrainTimeout = 5 * time.Second
	// DefaultLeaseWait is how long GetOrCompile waits for another
	// machine's lease when Options.LeaseWait is 0: longer than most
	// compiles, short enough that a stuck holder costs one compile, not a
	// stuck job.
	DefaultLeaseWait = 2 * time.Minute
)

// Options configure a tiered cache. The zero value of every field
// means its default.
type Options struct {
	// QueueLen bounds the remote puts waiting for a worker; 0 means
	// DefaultQueueLen. A Put that finds the queue full drops its
	// remote put (counted in TierStats.RemotePutDropped) rather than
	// wait.
	QueueLen int
	// RemotePutWorkers is the number of goroutines that drain the queue;
	// 0 means DefaultRemotePutWorkers.
	RemotePutWorkers int
	// SyncRemotePut makes Put write the remote tier itself before it
	// returns, instead of queueing the remote put: the entry is then on
	// the remote tier, for other machines to find, when Put returns
	// (unless the remote put failed: Put still returns nil, as the remote
	// tier fails open, and TierStats.RemotePutFailed counts it). No
	// queue or workers are started.
	SyncRemotePut bool
	// DrainTimeout bounds how long Close waits for queued remote puts to
	// finish; 0 means DefaultDrainTimeout. The puts still queued
	// then are dropped (counted in TierStats.RemotePutDropped), and
	// those under way are cancelled through their context.
	DrainTimeout time.Duration
	// Leaser hands out the leases that make machines compile a key once
	// (GetOrCompile); nil means none: each machine compiles a key it
	// misses, once per machine.
	Leaser Leaser
	// LeaseWait bounds how long GetOrCompile waits while another machine
	// holds a key's lease; 0 means DefaultLeaseWait. Past it, it compiles
	// without the lease (counted in TierStats.LeaseWaitTimeouts): a
	// waiter never waits forever.
	LeaseWait time.Duration
}

// withDefaults checks o and returns it with every zero field set to its
// default.
func (o Options) withDefaults() (Options, error) {
	for _, f := range []struct {
		name  string
		v     int64
		valid string
	}{
		{"QueueLen", int64(o.QueueLen), "0 (DefaultQueueLen) or a positive count"},
		{"RemotePutWorkers", int64(o.RemotePutWorkers), "0 (DefaultRemotePutWorkers) or a positive count"},
		{"DrainTimeout", int64(o.DrainTimeout), "0 (DefaultDrainTimeout) or a positive duration"},
		{"LeaseWait", int64(o.LeaseWait), "0 (DefaultLeaseWait) or a positive duration"},
	} {
		if f.v < 0 {
			v := fmt.Sprint(f.v)
			if f.name == "DrainTimeout" || f.name == "LeaseWait" {
				v = time.Duration(f.v).String()
			}
			return o, fmt.Errorf("tiered: Options.%s %s: want %s: %w", f.name, v, f.valid, progcache.ErrInvalidConfig)
		}
	}
	o.QueueLen = cmp.Or(o.QueueLen, DefaultQueueLen)
	o.RemotePutWorkers = cmp.Or(o.RemotePutWorkers, DefaultRemotePutWorkers)
	o.DrainTimeout = cmp.Or(o.DrainTimeout, DefaultDrainTimeout)
	o.LeaseWait = cmp.Or(o.LeaseWait, DefaultLeaseWait)
	return o, nil
}

var (
	_ progcache.Grouped       = (*Cache)(nil)
	_ progcache.Viewer        = (*Cache)(nil)
	_ progcache.CompileLeader = (*Cache)(nil)
)

// Cache is a local cache (progcache.Memory, filestream.Cache, bolt.Cache)
// in front of a remote one that machines share: any progcache.Cache, such
// as redistier's. It implements progcache's Cache, Viewer, Grouped and
// CompileLeader:
//
//   - Get and View look in the local tier, then, on a local miss, in the
//     remote tier; a remote hit is put into the local tier (a backfill:
//     its failure is counted, not returned) and returned.
//   - Put stores in the local tier and returns its error; the remote put
//     is queued (or, with SyncRemotePut, made before Put returns) unless
//     the local put failed for ctx or a closed cache. An object the local
//     tier cannot keep (ErrTooLarge, ErrReadOnly) still goes to the
//     remote tier. Put keeps its own copy of obj for the queue.
//   - The remote tier fails open: an error of its Get or Put is counted
//     in TierStats and is a miss, or a dropped put, never an error of
//     Get, View, Put or GetOrCompile (ctx's own errors excepted).
//   - Delete and Clear apply to both tiers, and to the remote puts still
//     queued, so that what they removed does not come back from the
//     remote tier. The remote tier is shared: Clear empties it for every
//     machine. Their remote errors are returned, since the entries are
//     still there.
//   - Len is the local tier's: the entries this machine holds.
//   - Stats counts this cache's lookups (Hits: local and remote hits;
//     Misses: both tiers missed) and Puts (stored in the local tier), and
//     reports the local tier's contents, caps, evictions, too-large,
//     corrupt and unreadable counts. TierStats has the rest.
//   - GetOrCompile (through its own Group) takes the local tier's
//     cross-process lock, then the key's lease from Options.Leaser,
//     so that machines compile a key once; see LeadCompile.
//
// Cache owns its tiers: Close closes both. It does not own the Leaser.
// Use the Cache value, not its tiers, for GetOrCompile: the tiers' own
// Groups know nothing of each other's flights.
//
// A Cache is safe for concurrent use by multiple goroutines, Close
// included.
type Cache struct {
	// Locking: Cache has no lock of its own on its paths. Its counters are
	// atomics, closed is set once by Close, and opts, the tiers and the
	// Leaser never change; the tiers and the Leaser are safe for concurrent
	// use and are called with no Cache lock held. The remote put queue has
	// its own lock (putQueue), never held while a tier is called; group has
	// its own, never held together with the queue's.

	local, remote progcache.Cache
	mem           *progcache.Memory // local, when it is a Memory: Get's fast path
	opts          Options

	closed    atomic.Bool
	closing   chan struct{} // closed when Close starts: lease waits end
	closeOnce sync.Once

	queue *putQueue // nil with SyncRemotePut
	group progcache.Group
	st    tieredCounters
	hooks tieredHooks
}

// tieredHooks are test hooks, set before the cache is shared.
type tieredHooks struct {
	leaseWaiting func(k progcache.Key) // a compile found k's lease held and starts waiting
}

// New returns a tiered cache over local and remote, which it owns
// from then on (Close closes them). A nil tier or an out-of-range option
// is an error wrapping ErrInvalidConfig that names it.
func New(local, remote progcache.Cache, opts Options) (*Cache, error) {
	if local == nil || remote == nil {
		return nil, fmt.Errorf("tiered: New: local tier %T, remote tier %T: want two caches, neither nil: %w", local, remote, progcache.ErrInvalidConfig)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &Cache{local: local, remote: remote, opts: opts, closing: make(chan struct{})}
	t.mem, _ = local.(*progcache.Memory)
	if !opts.SyncRemotePut {
		t.queue = newPutQueue(remote, opts.QueueLen, opts.RemotePutWorkers, &t.st)
	}
	return t, nil
}

// errClosed is the error of a method called after Close.
func (t *Cache) errClosed() error {
	return fmt.Errorf("tiered: %w", progcache.ErrClosed) // "tiered: cache closed"
}

// Group returns the Group that GetOrCompile uses for this cache.
func (t *Cache) Group() *progcache.Group { return &t.group }

// Local returns the local tier.
func (t *Cache) Local() progcache.Cache { return t.local }

// Remote returns the remote tier.
func (t *Cache) Remote() progcache.Cache { return t.remote }

// Get returns the object stored under k in the local tier, or else in
// the remote tier, backfilling the local tier from a remote hit. A remote
// error is a miss (counted in TierStats.RemoteErrors).
func (t *Cache) Get(ctx context.Context, k progcache.Key) (obj progcache.Object, ok bool, err error) {
	if t.closed.Load() {
		return progcache.Object{}, false, t.errClosed()
	}
	// Object has too many fields to live in registers, and each copy
	// of it through a variable cost a hit a few ns (issue 41): a Memory
	// tier writes it straight into Get's result, and another tier's
	// results go there without a variable between.
	if t.mem != nil {
		ok, err = t.mem.GetInto(ctx, k, &obj)
	} else {
		obj, ok, err = t.local.Get(ctx, k)
	}
	if ok && err == nil {
		t.st.localHits.Add(1)
		return obj, ok, err
	}
	if err != nil {
		return progcache.Object{}, false, err
	}
	return t.getRemote(ctx, k)
}

// View lends fn the object stored under k (see Viewer): through the local
// tier's View when it is a Viewer, and otherwise as ViewFrom does; after
// a local miss, the object from the remote tier, backfilled as Get does.
func (t *Cache) View(ctx context.Context, k progcache.Key, fn func(progcache.View) error) (bool, error) {
	if t.closed.Load() {
		return false, t.errClosed()
	}
	ok, err := progcache.ViewFrom(ctx, t.local, k, fn)
	if ok {
		t.st.localHits.Add(1)
	}
	if ok || err != nil {
		return ok, err
	}
	obj, ok, err := t.getRemote(ctx, k)
	if !ok || err != nil {
		return ok, err
	}
	return true, fn(progcache.ViewOf(obj))
}

// getRemote is a lookup's remote half, after a local miss: it counts the
// remote hit or the miss.
func (t *Cache) getRemote(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	obj, ok, err := t.peekRemote(ctx, k)
	switch {
	case err != nil:
		return progcache.Object{}, false, err
	case !ok:
		t.st.misses.Add(1)
		return progcache.Object{}, false, nil
	}
	t.st.remoteHits.Add(1)
	return obj, true, nil
}

// peekRemote looks k up in the remote tier, backfilling the local tier
// from a hit, and counts no lookup (getRemote does, for Get and View). A
// remote error is a miss, counted in RemoteErrors, as the remote tier
// fails open; only ctx's own error is returned.
func (t *Cache) peekRemote(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	obj, ok, err := t.remote.Get(ctx, k)
	if err != nil {
		if ctx.Err() != nil {
			return progcache.Object{}, false, ctx.Err()
		}
		t.st.remoteErrors.Add(1)
		return progcache.Object{}, false, nil
	}
	if ok {
		t.backfill(ctx, k, obj)
	}
	return obj, ok, nil
}

// backfill puts a remote hit into the local tier; a failure is counted,
// as the object is served all the same.
func (t *Cache) backfill(ctx context.Context, k progcache.Key, obj progcache.Object) {
	if err := t.local.Put(ctx, k, obj); err != nil {
		t.st.backfillFailed.Add(1)
		return
	}
	t.st.backfills.Add(1)
}

// Put stores obj under k in the local tier and returns its error, and
// queues the remote put (with SyncRemotePut, makes it; see Options).
// The remote put is dropped (counted) when the queue is full; its failure
// is counted, never returned.
func (t *Cache) Put(ctx context.Context, k progcache.Key, obj progcache.Object) error {
	if t.closed.Load() {
		return t.errClosed()
	}
	return t.put(ctx, k, obj, t.opts.SyncRemotePut)
}

// put is Put, with the remote put made before it returns when syncRemote
// is set.
func (t *Cache) put(ctx context.Context, k progcache.Key, obj progcache.Object, syncRemote bool) error {
	err := t.local.Put(ctx, k, obj)
	if err == nil {
		t.st.puts.Add(1)
	}
	if ctx.Err() != nil || errors.Is(err, progcache.ErrClosed) {
		return err
	}
	if syncRemote {
		t.putRemote(ctx, k, obj)
	} else {
		t.queue.push(k, obj.Clone())
	}
	return err
}

// putRemote puts obj into the remote tier now, counting the outcome.
func (t *Cache) putRemote(ctx context.Context, k progcache.Key, obj progcache.Object) {
	if err := t.remote.Put(ctx, k, obj); err != nil {
		t.st.remotePutFailed.Add(1)
		return
	}
	t.st.remotePutDone.Add(1)
}

// Delete removes k from both tiers, after dropping k's queued remote puts
// and waiting for those under way. An absent key is not an error; a
// remote error is returned, since the entry may still be there.
func (t *Cache) Delete(ctx context.Context, k progcache.Key) error {
	if t.closed.Load() {
		return t.errClosed()
	}
	if err := t.local.Delete(ctx, k); err != nil {
		return err
	}
	if err := t.queue.cancel(ctx, &k); err != nil {
		return err
	}
	if err := t.remote.Delete(ctx, k); err != nil {
		t.st.remoteErrors.Add(1)
		return fmt.Errorf("tiered: delete from the remote tier: %w", err)
	}
	return nil
}

// Clear removes every entry from both tiers, after dropping the queued
// remote puts and waiting for those under way. The remote tier is shared:
// this empties it for every machine that uses it. A remote error is
// returned.
func (t *Cache) Clear(ctx context.Context) error {
	if t.closed.Load() {
		return t.errClosed()
	}
	if err := t.local.Clear(ctx); err != nil {
		return err
	}
	if err := t.queue.cancel(ctx, nil); err != nil {
		return err
	}
	if err := t.remote.Clear(ctx); err != nil {
		t.st.remoteErrors.Add(1)
		return fmt.Errorf("tiered: clear the remote tier: %w", err)
	}
	return nil
}

// Len returns the number of entries in the local tier: those this machine
// holds. The remote tier's own Len counts the shared ones.
func (t *Cache) Len(ctx context.Context) (int, error) {
	if t.closed.Load() {
		return 0, t.errClosed()
	}
	return t.local.Len(ctx)
}

// Stats returns this cache's lookups and puts and the local tier's
// contents and other counters (see Cache).
func (t *Cache) Stats() progcache.Stats {
	s := t.local.Stats()
	s.Hits = t.st.localHits.Load() + t.st.remoteHits.Load()
	s.Misses = t.st.misses.Load()
	s.Puts = t.st.puts.Load()
	return s
}

// TierStats are a tiered cache's counters, beside each tier's own Stats.
// Every count is of events since the cache was made.
type TierStats struct {
	// Local and Remote are the tiers' own Stats. Their hits and misses
	// include the lookups Cache makes for its own ends (backfills,
	// looking again before a compile, polling while another machine
	// holds a lease).
	Local  progcache.Stats `json:"local"`
	Remote progcache.Stats `json:"remote"`

	// Lookups by Get and View: served by the local tier, served by the
	// remote tier after a local miss, or missed by both (a remote error
	// included).
	LocalHits  int64 `json:"local_hits"`
	RemoteHits int64 `json:"remote_hits"`
	Misses     int64 `json:"misses"`
	// Backfills counts remote hits put into the local tier;
	// BackfillFailed those the local tier refused (served all the same).
	Backfills      int64 `json:"backfills"`
	BackfillFailed int64 `json:"backfill_failed"`
	// RemoteErrors counts failed remote lookups (each a miss, as the
	// remote tier fails open), deletes and clears.
	RemoteErrors int64 `json:"remote_errors"`

	// Remote puts: accepted into the queue; not queued because the queue
	// was full or the cache closing, or left queued when Close's drain
	// time ran out; removed from the queue by Delete or Clear; stored;
	// failed. Done and Failed count synchronous puts too.
	RemotePutQueued    int64 `json:"remote_put_queued"`
	RemotePutDropped   int64 `json:"remote_put_dropped"`
	RemotePutCancelled int64 `json:"remote_put_cancelled"`
	RemotePutDone      int64 `json:"remote_put_done"`
	RemotePutFailed    int64 `json:"remote_put_failed"`
	// QueueLen is the number of remote puts queued now, not yet started.
	QueueLen int64 `json:"queue_len"`

	// Leases (GetOrCompile with a Leaser): taken at the first attempt;
	// found held, so the compile waited; waits that ended with the
	// holder's entry in the remote tier; waits that ended by taking the
	// lease (the holder released it without storing, or died and its
	// lease expired); waits that ran past LeaseWait and compiled without
	// the lease; Acquire errors (compiled without the lease); Release
	// errors.
	LeaseAcquired      int64 `json:"lease_acquired"`
	LeaseWaited        int64 `json:"lease_waited"`
	LeaseWaitHits      int64 `json:"lease_wait_hits"`
	LeaseTakenOver     int64 `json:"lease_taken_over"`
	LeaseWaitTimeouts  int64 `json:"lease_wait_timeouts"`
	LeaseAcquireErrors int64 `json:"lease_acquire_errors"`
	LeaseReleaseErrors int64 `json:"lease_release_errors"`
}

// tieredCounters are TierStats' event counters.
type tieredCounters struct {
	localHits, remoteHits, misses, puts       atomic.Int64
	backfills, backfillFailed, remoteErrors   atomic.Int64
	putQueued, putDropped, putCancelled       atomic.Int64
	remotePutDone, remotePutFailed            atomic.Int64
	leaseAcquired, leaseWaited, leaseWaitHits atomic.Int64
	leaseTakenOver, leaseWaitTimeouts         atomic.Int64
	leaseAcquireErrors, leaseReleaseErrors    atomic.Int64
}

// TierStats returns the counters of both tiers and of the traffic between
// them. It keeps answering after Close.
func (t *Cache) TierStats() TierStats {
	c := &t.st
	return TierStats{
		Local:              t.local.Stats(),
		Remote:             t.remote.Stats(),
		LocalHits:          c.localHits.Load(),
		RemoteHits:         c.remoteHits.Load(),
		Misses:             c.misses.Load(),
		Backfills:          c.backfills.Load(),
		BackfillFailed:     c.backfillFailed.Load(),
		RemoteErrors:       c.remoteErrors.Load(),
		RemotePutQueued:    c.putQueued.Load(),
		RemotePutDropped:   c.putDropped.Load(),
		RemotePutCancelled: c.putCancelled.Load(),
		RemotePutDone:      c.remotePutDone.Load(),
		RemotePutFailed:    c.remotePutFailed.Load(),
		QueueLen:           int64(t.queue.len()),
		LeaseAcquired:      c.leaseAcquired.Load(),
		LeaseWaited:        c.leaseWaited.Load(),
		LeaseWaitHits:      c.leaseWaitHits.Load(),
		LeaseTakenOver:     c.leaseTakenOver.Load(),
		LeaseWaitTimeouts:  c.leaseWaitTimeouts.Load(),
		LeaseAcquireErrors: c.leaseAcquireErrors.Load(),
		LeaseReleaseErrors: c.leaseReleaseErrors.Load(),
	}
}

// Close stops taking work, lets the queued remote puts finish for up to
// DrainTimeout (dropping, and counting, what is left then), and closes
// both tiers, returning their errors. It leaves the Leaser open. A
// GetOrCompile waiting for another machine's lease stops waiting with
// ErrClosed. Close is idempotent; Stats and TierStats keep answering.
func (t *Cache) Close() error {
	first := false
	var err error
	t.closeOnce.Do(func() {
		first = true
		t.closed.Store(true)
		close(t.closing)
		t.queue.close(t.opts.DrainTimeout)
		err = errors.Join(t.local.Close(), t.remote.Close())
		// Workers still running are cancelled and the remote tier is
		// closed: they end now.
		t.queue.wait()
	})
	if !first {
		return nil
	}
	return err
}
