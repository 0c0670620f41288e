package progcache_test

// A cache of another package joins compile-once through the exported
// capabilities (ProcessLocker, CompileLeader), as filestream and tiered do.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/cachetest"
)

// keyLocks is a lock per key shared by several procCaches, standing for a
// lock that processes share (a lock file, a lock server).
//
// Locking: mu guards held; a key's channel is closed when its holder
// unlocks.
type keyLocks struct {
	mu      sync.Mutex
	held    map[progcache.Key]chan struct{}
	waiting func(progcache.Key) // called when a LockKey finds k held
}

// procCache is one process's view of a store that processes share: its
// own Group, the shared store and the shared locks.
type procCache struct {
	*progcache.Memory
	group progcache.Group
	locks *keyLocks
	peeks atomic.Int32
}

var _ progcache.ProcessLocker = (*procCache)(nil)

func (c *procCache) Group() *progcache.Group { return &c.group }

func (c *procCache) LockKey(ctx context.Context, k progcache.Key) (func(), *progcache.Object, error) {
	for {
		c.locks.mu.Lock()
		ch, ok := c.locks.held[k]
		if !ok {
			ch = make(chan struct{})
			c.locks.held[k] = ch
			c.locks.mu.Unlock()
			return func() {
				c.locks.mu.Lock()
				delete(c.locks.held, k)
				c.locks.mu.Unlock()
				close(ch)
			}, nil, nil
		}
		c.locks.mu.Unlock()
		if c.locks.waiting != nil {
			c.locks.waiting(k)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

func (c *procCache) Peek(ctx context.Context, k progcache.Key) (progcache.Object, bool, error) {
	c.peeks.Add(1)
	return c.Memory.Get(ctx, k)
}

func newStore(t *testing.T) *progcache.Memory {
	t.Helper()
	m, err := progcache.NewMemory(progcache.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Two "processes" share a store but not a Group: only the ProcessLocker
// makes the second wait for the first's compile and find its object.
func TestProcessLockerJoinsCompileOnce(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	bWaiting := make(chan struct{})
	locks := &keyLocks{held: map[progcache.Key]chan struct{}{}}
	var once sync.Once
	locks.waiting = func(progcache.Key) { once.Do(func() { close(bWaiting) }) }
	a := &procCache{Memory: store, locks: locks}
	b := &procCache{Memory: store, locks: locks}
	k, want := cachetest.KeyN(1), cachetest.ObjectN(1, 300)

	var compiles atomic.Int32
	aStarted := make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		obj, err := progcache.GetOrCompile(ctx, a, k, func(context.Context) (progcache.Object, error) {
			compiles.Add(1)
			close(aStarted)
			<-bWaiting // b is waiting on a's lock
			return want, nil
		})
		if err == nil && !obj.Equal(want) {
			err = errors.New("a got another object")
		}
		aDone <- err
	}()
	<-aStarted
	obj, err := progcache.GetOrCompile(ctx, b, k, func(context.Context) (progcache.Object, error) {
		compiles.Add(1)
		return cachetest.ObjectN(2, 300), nil
	})
	if err != nil || !obj.Equal(want) {
		t.Fatalf("b: GetOrCompile = %v, %v; want a's object", obj.Name, err)
	}
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if n := compiles.Load(); n != 1 {
		t.Errorf("compiled %d times across two processes, want 1", n)
	}
	// Each leader peeks once it holds the lock: a's misses, and b's, once
	// a has unlocked, finds a's object.
	if a.peeks.Load() != 1 || b.peeks.Load() != 1 {
		t.Errorf("peeks: a %d, b %d; want each leader to Peek once it holds the lock", a.peeks.Load(), b.peeks.Load())
	}
}

// A lock that cannot be taken here (CannotStore) lets the compile run
// unlocked rather than fail it.
func TestProcessLockerCannotStore(t *testing.T) {
	c := &readOnlyLocker{procCache{Memory: newStore(t), locks: &keyLocks{held: map[progcache.Key]chan struct{}{}}}}
	want := cachetest.ObjectN(3, 100)
	obj, err := progcache.GetOrCompile(context.Background(), c, cachetest.KeyN(3), func(context.Context) (progcache.Object, error) { return want, nil })
	if err != nil || !obj.Equal(want) {
		t.Fatalf("GetOrCompile = %v, %v; want the compiled object and no error", obj.Name, err)
	}
}

type readOnlyLocker struct{ procCache }

func (c *readOnlyLocker) LockKey(context.Context, progcache.Key) (func(), *progcache.Object, error) {
	return nil, nil, progcache.ErrReadOnly
}

// leaderCache compiles for its Group's flights itself, under its inner
// cache's lock (as tiered does under its local tier's).
type leaderCache struct {
	*procCache
	leads atomic.Int32
}

var _ progcache.CompileLeader = (*leaderCache)(nil)

func (c *leaderCache) LeadCompile(ctx context.Context, k progcache.Key, compile progcache.CompileFunc) (progcache.Object, error) {
	c.leads.Add(1)
	unlock, hit, err := progcache.LockForCompile(ctx, c.procCache, k)
	if err != nil {
		return progcache.Object{}, err
	}
	if hit != nil {
		return *hit, nil
	}
	defer unlock()
	obj, err := compile(ctx)
	if err != nil {
		return progcache.Object{}, err
	}
	if err := c.Put(ctx, k, obj); err != nil && !progcache.CannotStore(err) {
		return obj, err
	}
	return obj, nil
}

func TestCompileLeaderJoinsCompileOnce(t *testing.T) {
	ctx := context.Background()
	c := &leaderCache{procCache: &procCache{Memory: newStore(t), locks: &keyLocks{held: map[progcache.Key]chan struct{}{}}}}
	const callers = 8
	allWaiting := make(chan struct{})
	var waiting atomic.Int32
	progcache.SetGroupWaiting(c.Group(), func(progcache.Key) {
		if waiting.Add(1) == callers-1 {
			close(allWaiting)
		}
	})
	k, want := cachetest.KeyN(4), cachetest.ObjectN(4, 500)
	var compiles atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			obj, err := progcache.GetOrCompile(ctx, c, k, func(context.Context) (progcache.Object, error) {
				compiles.Add(1)
				<-allWaiting
				return want, nil
			})
			if err == nil && !obj.Equal(want) {
				err = errors.New("got another object")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if compiles.Load() != 1 || c.leads.Load() != 1 {
		t.Errorf("compiles %d, LeadCompile calls %d; want 1 and 1", compiles.Load(), c.leads.Load())
	}
	if obj, ok, err := c.Get(ctx, k); err != nil || !ok || !obj.Equal(want) {
		t.Errorf("after GetOrCompile, Get = %v, %v, %v; want the stored object", obj.Name, ok, err)
	}
}
