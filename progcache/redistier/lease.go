package redistier

// Leases: compile-once across machines.
//
// A lease on key k is the Redis key progcache:<ns>:l:<k> holding a random
// token, set with SET NX PX LeaseTTL: whoever's SET succeeds holds it. The
// holder's heartbeat extends it every LeaseTTL/3 with a script that sets
// the expiry only if the key still holds the holder's token, and Release
// deletes it with a script that deletes only on that same condition, so a
// holder whose lease expired and was taken over can neither extend nor
// release the new holder's lease.
//
// A lease that no holder of ours could have set is stale, and Acquire
// takes it over in the same script that tries SET NX: one without an
// expiry (PTTL -1), which would otherwise block every compile of its key
// for the whole LeaseWait for ever, or one with more than MaxLeaseTTL
// left (LeaseTTL is at most that). Only a writer that can write the
// namespace without being a holder plants such a lease; taking it over
// costs compile-once nothing, since no holder is behind it.
//
// A holder that dies stops extending: its lease expires at most LeaseTTL
// after its last heartbeat, and the next Acquire takes it. A holder that
// cannot reach Redis for LeaseTTL has lost its lease too: its heartbeat
// notices (the expiry it last set has passed) and closes Lost. A SET NX
// that timed out may still have taken the lease on the server; nobody
// holds its token, so it expires after LeaseTTL like a dead holder's.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/tiered"
)

// acquireScript takes the lease KEYS[1] for the token ARGV[1] with expiry
// ARGV[2] ms: it returns 1 if it was free, 2 if it was stale (no expiry,
// or more than ARGV[3] ms left) and taken over, 0 if another holder has
// it.
var acquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return 1
end
local left = redis.call('PTTL', KEYS[1])
if left == -1 or left > tonumber(ARGV[3]) then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	return 2
end
return 0`)

// extendScript sets KEYS[1]'s expiry to ARGV[2] ms if it holds the token
// ARGV[1]; it returns 1 if it did, 0 if the lease is gone or another's.
var extendScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)

// releaseScript deletes KEYS[1] if it holds the token ARGV[1]; it returns
// 1 if it did, 0 if the lease is gone or another's.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// Lease is a lease on one key, taken by Cache.AcquireLease (or Acquire):
// while it is held, no other Acquire of the key, in any process sharing
// the namespace, succeeds. A heartbeat extends it until Release.
//
// A Lease is safe for concurrent use by multiple goroutines.
type Lease struct {
	// Locking: the fields above lostOnce are set before the lease is shared
	// (stop, which ends the heartbeat goroutine, may be called any number of
	// times; the goroutine closes done when it returns). lostOnce closes lost
	// once. relMu serialises releases and guards released; it is held while
	// a release talks to Redis, which is all a second Release could wait
	// for.

	c     *Cache
	k     progcache.Key
	key   string
	token string

	ctx  context.Context // the heartbeat's; cancelled by stop
	stop context.CancelFunc
	done chan struct{}

	lostOnce sync.Once
	lost     chan struct{}

	relMu    sync.Mutex
	released bool
}

var _ tiered.Leaser = (*Cache)(nil)

// Acquire is AcquireLease for tiered.Leaser, so that a Cache is the
// lease service of a tiered.Cache (tiered.Options.Leaser): the
// Lease it returns is a *Lease, and it is a nil interface, not a nil
// *Lease inside one, when another holder has the lease.
func (c *Cache) Acquire(ctx context.Context, k progcache.Key) (tiered.Lease, error) {
	l, err := c.AcquireLease(ctx, k)
	if l == nil {
		return nil, err
	}
	return l, err
}

// AcquireLease tries to take the lease on k: (lease, nil) when this call
// took it (free, or stale: without an expiry or with more than
// MaxLeaseTTL left, which no holder sets), (nil, nil) when another holder
// has it, and an error wrapping
// ErrUnavailable when Redis could not be asked (the caller then decides,
// usually to compile without the lease). A taken lease is extended every
// LeaseTTL/3 until its Release, or until Close.
func (c *Cache) AcquireLease(ctx context.Context, k progcache.Key) (*Lease, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:]) // crypto/rand.Read never fails
	l := &Lease{c: c, k: k, key: c.ks.lease(k), token: hex.EncodeToString(tok[:]), done: make(chan struct{}), lost: make(chan struct{})}
	sent := time.Now()
	took, err := callValue(ctx, c, "acquire lease", func(ctx context.Context) (int64, error) {
		return acquireScript.Run(ctx, c.client, []string{l.key}, l.token, c.opts.LeaseTTL.Milliseconds(), MaxLeaseTTL.Milliseconds()).Int64()
	})
	if err != nil {
		return nil, err
	}
	if took == 0 {
		c.n.leasesContended.Add(1)
		return nil, nil
	}
	if took == 2 {
		c.n.leasesStale.Add(1)
	}
	c.n.leasesAcquired.Add(1)
	l.ctx, l.stop = context.WithCancel(context.Background())
	c.mu.Lock()
	if c.closed.Load() {
		// Close ran while the SET was in flight and released the leases
		// it knew of: release this one too.
		c.mu.Unlock()
		close(l.done)
		_ = l.release(context.Background())
		return nil, fmt.Errorf("redistier: acquire lease on %s: %w", k, progcache.ErrClosed)
	}
	c.leases[l] = struct{}{}
	c.mu.Unlock()
	go l.heartbeat(sent.Add(c.opts.LeaseTTL))
	return l, nil
}

// Key returns the key the lease is on.
func (l *Lease) Key() progcache.Key { return l.k }

// Lost returns a channel that is closed when the lease turned out to be
// lost before its Release: its heartbeat found it expired or held by
// another, or could not reach Redis until the expiry it last set had
// passed. Another process may then be compiling the same key; what this
// holder stores is still right (the key names the program), only the
// compile-once promise is broken.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// heartbeat extends the lease every LeaseTTL/3 until stop. validUntil is
// when the lease runs out unless extended: the expiry the last successful
// SET or extension set, counted from when it was sent.
func (l *Lease) heartbeat(validUntil time.Time) {
	defer close(l.done)
	c := l.c
	ttl := c.opts.LeaseTTL
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		n, err := callValue(l.ctx, c, "extend lease", func(ctx context.Context) (int64, error) {
			return extendScript.Run(ctx, c.client, []string{l.key}, l.token, ttl.Milliseconds()).Int64()
		})
		switch {
		case l.ctx.Err() != nil:
			return
		case err == nil && n == 1:
			validUntil = sent.Add(ttl)
		case err == nil:
			l.markLost()
			return
		default:
			c.n.heartbeatFailures.Add(1)
			if !time.Now().Before(validUntil) {
				l.markLost()
				return
			}
		}
	}
}

func (l *Lease) markLost() {
	l.lostOnce.Do(func() {
		l.c.n.leasesLost.Add(1)
		close(l.lost)
	})
}

// Release gives the lease up: it stops the heartbeat and deletes the
// lease if this holder still has it, so the next Acquire takes it at once.
// A lease that was lost meanwhile is left to its new holder (and counted
// lost). Release returns an error wrapping ErrUnavailable when Redis could
// not be asked: the heartbeat is stopped all the same, so the lease lapses
// after LeaseTTL unless a later Release gets through. Once a Release got
// through, later calls return nil and do nothing.
func (l *Lease) Release(ctx context.Context) error { return l.release(ctx) }

func (l *Lease) release(ctx context.Context) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.released {
		return nil
	}
	c := l.c
	l.stop()
	<-l.done
	c.mu.Lock()
	delete(c.leases, l)
	c.mu.Unlock()
	n, err := callValue(ctx, c, "release lease", func(ctx context.Context) (int64, error) {
		return releaseScript.Run(ctx, c.client, []string{l.key}, l.token).Int64()
	})
	if err != nil {
		return err
	}
	l.released = true
	if n == 1 {
		c.n.leasesReleased.Add(1)
	} else {
		l.markLost()
	}
	return nil
}
