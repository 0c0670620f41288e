package tiered

// GetOrCompile on a tiered cache: compile once across machines.
//
// The Group (progcache's group.go) makes callers in this process compile a key once;
// the local tier's cross-process lock (filestream's lock files) makes the
// processes that share it do the same. Machines with separate local
// caches share only the remote tier, so the leader that holds both takes
// a third lock beside it: the key's lease from Options.Leaser.
//
// A machine that finds the lease held waits, polling the remote tier for
// the holder's entry with a backoff (5 ms doubling to 200 ms), and tries
// the lease again after each poll: a holder that dies stops keeping its
// lease alive, the lease expires, and a waiter takes it over and
// compiles. A waiter never waits past LeaseWait: then it compiles without
// the lease. The holder puts its object into the remote tier before it
// releases the lease, synchronously, so a waiter that takes the lease
// after a release finds the entry when it looks again.
//
// Everything here fails open: a lease service that cannot be asked, or a
// remote tier that fails, costs at most a compile more, never a failed
// one.

import (
	"context"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

const (
	// leasePollMin and leasePollMax bound the wait between two polls of a
	// waiter: short at first, as most compiles a waiter meets are nearly
	// done, and doubling to a rate the remote tier barely notices.
	leasePollMin = 5 * time.Millisecond
	leasePollMax = 200 * time.Millisecond
	// leaseReleaseTimeout bounds a Release: it runs even when the caller's
	// ctx has ended, and must not hold GetOrCompile's return for long.
	leaseReleaseTimeout = 5 * time.Second
)

// LeadCompile compiles k for the Group's flight (CompileLeader): under the local tier's
// cross-process lock, then k's lease, looking at both tiers again once it
// holds them; and it stores the object, in the remote tier before the
// lease is released.
func (t *Cache) LeadCompile(ctx context.Context, k progcache.Key, compile progcache.CompileFunc) (progcache.Object, error) {
	unlock, hit, err := progcache.LockForCompile(ctx, t.local, k)
	if err != nil {
		return progcache.Object{}, err
	}
	if hit != nil {
		return *hit, nil
	}
	defer unlock()

	var lease Lease
	if t.opts.Leaser != nil {
		var obj progcache.Object
		var ok bool
		lease, obj, ok, err = t.acquire(ctx, k)
		if err != nil || ok {
			return obj, err
		}
		if lease != nil {
			defer t.release(ctx, lease)
		}
	}
	// Another process or machine may have stored it since our lookup.
	if obj, ok, err := t.peek(ctx, k); err != nil || ok {
		return obj, err
	}
	obj, err := compile(ctx)
	if err != nil {
		return progcache.Object{}, err
	}
	// Under a lease the remote put is made now: waiters elsewhere look
	// for the entry there once the lease is released (deferred above).
	if err := t.put(ctx, k, obj, lease != nil || t.opts.SyncRemotePut); err != nil && !progcache.CannotStore(err) {
		return obj, err
	}
	return obj, nil
}

// peek looks k up in both tiers without counting a lookup, backfilling
// the local tier from a remote hit. A remote error is a miss.
func (t *Cache) peek(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	if obj, ok, err := t.peekLocal(ctx, k); err != nil || ok {
		return obj, ok, err
	}
	return t.peekRemote(ctx, k)
}

// peekLocal looks k up in the local tier without counting a lookup of
// Cache's (nor a miss of the local tier's, when it can: a ProcessLocker, as filestream.Cache is).
func (t *Cache) peekLocal(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	if pl, ok := t.local.(progcache.ProcessLocker); ok {
		return pl.Peek(ctx, k)
	}
	return t.local.Get(ctx, k)
}

// acquire takes k's lease, waiting while another machine holds it. It
// returns the lease; or the holder's object (ok), found in the remote
// tier while waiting; or neither, when the compile is to run without the
// lease (the Leaser failed, or the wait ran past LeaseWait); or ctx's
// error, or ErrClosed when the cache closes meanwhile.
func (t *Cache) acquire(ctx context.Context, k progcache.Key) (Lease, progcache.Object, bool, error) {
	lease, held, err := t.askLease(ctx, k)
	if err != nil || !held {
		if lease != nil {
			t.st.leaseAcquired.Add(1)
		}
		return lease, progcache.Object{}, false, err
	}

	t.st.leaseWaited.Add(1)
	if t.hooks.leaseWaiting != nil {
		t.hooks.leaseWaiting(k)
	}
	deadline := time.NewTimer(t.opts.LeaseWait)
	defer deadline.Stop()
	poll := time.NewTimer(leasePollMin)
	defer poll.Stop()
	for wait := leasePollMin; ; {
		select {
		case <-ctx.Done():
			return nil, progcache.Object{}, false, ctx.Err()
		case <-t.closing:
			return nil, progcache.Object{}, false, t.errClosed()
		case <-deadline.C:
			t.st.leaseWaitTimeouts.Add(1)
			return nil, progcache.Object{}, false, nil
		case <-poll.C:
		}
		obj, ok, err := t.peekRemote(ctx, k)
		if err != nil || ok {
			if ok {
				t.st.leaseWaitHits.Add(1)
			}
			return nil, obj, ok, err
		}
		lease, held, err := t.askLease(ctx, k)
		if err != nil || !held {
			if lease != nil {
				t.st.leaseTakenOver.Add(1)
			}
			return lease, progcache.Object{}, false, err
		}
		wait = min(2*wait, leasePollMax)
		poll.Reset(wait)
	}
}

// askLease asks the Leaser for k's lease once. It returns the lease; or
// held, when another holder has it; or neither, when the Leaser could not
// be asked (counted: the compile goes ahead without a lease). Only ctx's
// error is returned.
func (t *Cache) askLease(ctx context.Context, k progcache.Key) (lease Lease, held bool, err error) {
	lease, err = t.opts.Leaser.Acquire(ctx, k)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, false, ctx.Err()
	case err != nil:
		t.st.leaseAcquireErrors.Add(1)
		return nil, false, nil
	}
	return lease, lease == nil, nil
}

// release gives lease up, even when ctx has ended, counting a failure:
// an unreleased lease expires on its own.
func (t *Cache) release(ctx context.Context, lease Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseReleaseTimeout)
	defer cancel()
	if err := lease.Release(rctx); err != nil {
		t.st.leaseReleaseErrors.Add(1)
	}
}
