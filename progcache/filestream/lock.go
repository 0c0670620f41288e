package filestream

// Cache's cross-process compile locks (GetOrCompile).
//
// A leader creates locks/<key hex>.lock with O_EXCL, writes its pid, host
// and lease into it, and keeps the file open to refresh its mtime (the
// heartbeat) every lease/4 through the descriptor. A waiter reads the
// holder's lease from the file and breaks the lock only when the heartbeat
// is older than that lease, however short its own: a waiter configured with
// a shorter lease must not break a live holder's lock. Breaking is
// identity-checked like pruning (rename to trash, compare, put back on a
// mismatch), so two waiters never remove a lock a third has just taken. A
// lock that is not a regular file is foreign: nobody takes it, and
// GetOrCompile compiles without the cross-process lock.
//
// What a lock file says is bounded by this cache's MaxLockLease, so a
// planted or damaged one cannot block a key for good: a holder's lease is
// capped at it, and a heartbeat further in the future than it is not
// clock skew but a stale lock (lockStale).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

// lockPollMax bounds how often a waiter looks at the cache and the lock: a
// fraction of the lease, so a dead holder is noticed soon after its lease
// ends, but at most this often.
const lockPollMax = 50 * time.Millisecond

// lockInfoMax bounds what a waiter reads of a lock file.
const lockInfoMax = 512

// lockMagic starts every lock file this package writes.
const lockMagic = "progcache-lock "

func lockName(k progcache.Key) string { return k.String() + ".lock" }

func (c *Cache) lockPath(k progcache.Key) string {
	return c.locks + string(os.PathSeparator) + lockName(k)
}

// lockContents is what a holder writes into its lock file.
func (c *Cache) lockContents() []byte {
	host, _ := os.Hostname()
	return fmt.Appendf(nil, lockMagic+"pid=%d host=%s lease=%d\n", os.Getpid(), strings.ReplaceAll(host, " ", "_"), c.opts.LockLease.Nanoseconds())
}

// holderLease reads the lease a holder wrote into its lock file; ok is
// false when the file says none (being written, or not ours).
func holderLease(b []byte) (time.Duration, bool) {
	for _, f := range strings.Fields(string(b)) {
		if v, found := strings.CutPrefix(f, "lease="); found {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil && n > 0 {
				return time.Duration(n), true
			}
		}
	}
	return 0, false
}

// lockStale reports whether a lock whose heartbeat (mtime) is mtime is
// stale at now, judged by lease, which the caller capped at MaxLockLease
// where it came from the file. A heartbeat in the future is taken for
// clock skew between hosts up to MaxLockLease, and further for a stale
// lock: so a lock is live at most until the heartbeat plus the lease, at
// most twice MaxLockLease from now.
func (c *Cache) lockStale(mtime time.Time, lease time.Duration, now time.Time) bool {
	age := now.Sub(mtime)
	return age < -c.opts.MaxLockLease || age > lease
}

// LockKey takes k's lock file, waiting while a live holder has it, for
// GetOrCompile (ProcessLocker). It returns hit instead when a peer stored
// the entry meanwhile. An error that CannotStore accepts (a read-only cache or directory, a foreign lock)
// means no lock can be taken here.
func (c *Cache) LockKey(ctx context.Context, k progcache.Key) (func(), *progcache.Object, error) {
	poll := min(c.opts.LockLease/8, lockPollMax)
	name := lockName(k)
	waited := false
	for {
		unlock, stale, err := c.tryLock(ctx, name)
		if err != nil || unlock != nil {
			return unlock, nil, err
		}
		if !waited {
			waited = true
			if c.hooks.waiting != nil {
				c.hooks.waiting(k)
			}
		}
		if obj, ok, err := c.get(ctx, k, false); err != nil || ok {
			return nil, &obj, err
		}
		if stale {
			continue // the holder was dead and its lock is broken: try again
		}
		if c.hooks.lockPolled != nil {
			c.hooks.lockPolled()
		}
		t := time.NewTimer(poll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		}
	}
}

// Peek is Get without counting a miss: the leader's look at the cache once
// it holds the lock, after the miss it already counted (ProcessLocker).
func (c *Cache) Peek(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	return c.get(ctx, k, false)
}

// tryLock makes one attempt: it takes the lock (unlock non-nil), or finds
// it held and breaks it when the holder's heartbeat is older than the
// holder's lease (stale), or finds it held by a live holder.
func (c *Cache) tryLock(ctx context.Context, name string) (unlock func(), stale bool, err error) {
	if err := c.enterWrite(ctx, "lock"); err != nil {
		return nil, false, err
	}
	defer c.life.RUnlock()
	f, err := c.locksD.create(name)
	if err == nil {
		_, werr := f.Write(c.lockContents())
		st, serr := fstatFile(f)
		if werr != nil || serr != nil {
			f.Close()
			// The write error is what counts; a lock file left behind
			// gets no heartbeat, so it goes stale and is broken.
			_ = c.locksD.remove(name)
			return nil, false, fmt.Errorf("filestream: write lock file: %w", errors.Join(werr, serr))
		}
		if c.hooks.lockHeld != nil {
			c.hooks.lockHeld()
		}
		return c.heartbeat(f, name, st), false, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, false, fmt.Errorf("filestream: create lock file: %w", err)
	}
	st, err := c.locksD.lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil // released meanwhile
	}
	if err != nil {
		return nil, false, fmt.Errorf("filestream: lock file: %w", err)
	}
	if !st.mode.IsRegular() {
		return nil, false, foreignError(c.locksD.join(name), st.mode, "a lock file")
	}
	lease := c.opts.LockLease
	if b, err := c.locksD.readSmall(name, lockInfoMax); err == nil {
		if l, ok := holderLease(b); ok {
			lease = min(l, c.opts.MaxLockLease)
		}
	}
	if !c.lockStale(st.mtime, lease, time.Now()) {
		return nil, false, nil
	}
	// Stale heartbeat: the holder died. Break the lock only if it is still
	// the file judged stale. A lock that cannot be broken (no permission
	// to rename it) is an error: reporting it as stale would send LockKey
	// straight back here in a loop.
	if _, err := c.removeIfSameLocked(c.locksD, name, st); err != nil {
		return nil, false, fmt.Errorf("filestream: break stale lock: %w", err)
	}
	return nil, true, nil
}

// heartbeat refreshes the lock's mtime every LockLease/4, through its open
// descriptor, until the returned unlock is called, which also removes the
// lock if it is still ours.
func (c *Cache) heartbeat(f *os.File, name string, mine fileStat) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(c.opts.LockLease / 4)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				// A missed beat is made up at the next tick, well
				// inside the lease (four ticks).
				_ = touchFile(f, time.Now())
			}
		}
	})
	return func() {
		close(stop)
		wg.Wait()
		f.Close()
		c.life.RLock()
		defer c.life.RUnlock()
		if c.closed {
			return // the lock goes stale and is broken or swept
		}
		// Remove only our own lock: if it was broken and retaken by a
		// peer (our heartbeat failed to keep it), leave theirs.
		if cur, err := c.locksD.lstat(name); err == nil && cur.sameIdentity(mine) {
			_ = c.locksD.remove(name) // left behind, it goes stale and is broken or swept
		}
	}
}

// sweepLockFilesLocked removes lock files left by killed holders that no
// waiter came to break: older than the temp lease and than the holder's
// lock lease (capped at MaxLockLease), or with a heartbeat further in the
// future than MaxLockLease (lockStale). Only our lock files are swept: a
// regular file named <key hex>.lock that is empty (its holder died before
// writing it) or starts as lockContents does. The removal is
// identity-checked, so a lock retaken meanwhile survives. The caller
// holds life.
func (c *Cache) sweepLockFilesLocked() {
	if c.locksD == nil {
		return
	}
	names, _ := c.locksD.names()
	for _, n := range names {
		hexKey, isLock := strings.CutSuffix(n, ".lock")
		if !isLock {
			continue
		}
		if _, err := progcache.ParseKey(hexKey); err != nil {
			continue
		}
		st, err := c.locksD.lstat(n)
		if err != nil || !st.mode.IsRegular() {
			continue
		}
		b, err := c.locksD.readSmall(n, lockInfoMax)
		if err != nil || len(b) > 0 && !bytes.HasPrefix(b, []byte(lockMagic)) {
			continue // not a lock file of ours
		}
		lease := max(c.opts.TempLease, c.opts.LockLease)
		if l, ok := holderLease(b); ok {
			lease = max(lease, min(l, c.opts.MaxLockLease))
		}
		if c.lockStale(st.mtime, lease, time.Now()) {
			_, _ = c.removeIfSameLocked(c.locksD, n, st) // best effort: the next sweep tries again
		}
	}
}
