package progcache

// Group: one compile per key, however many callers miss at once.
//
// Callers of one key on one Group share a flight: the first (the leader)
// compiles, under the cache's cross-process lock if it has one (lead, in
// compile.go), stores and returns the object; the others wait on a channel
// and get its result. The flight state lives in the Group, which lives in
// the cache value (or beside a cache of your own), so there is no
// package-level state.

import (
	"context"
	"errors"
	"sync"
)

// Group makes concurrent misses of one key compile once, in the manner of
// golang.org/x/sync/singleflight: while a compile of a key is in flight,
// other GetOrCompile calls for that key on the same Group wait for it and
// share its result. Errors are not kept: the next call after a failed
// compile compiles again. The zero value is ready to use; a Group must not
// be copied after first use.
//
// Use one Group per cache. Every cache of this module carries its own
// (Grouped), which the package-level GetOrCompile uses; for a cache of your
// own, keep a Group beside it and call Group.GetOrCompile, or give the
// cache a Group method. A Group shared by two caches still returns the
// right object (the key names it), but a caller on one cache may get an
// object compiled for, and stored only in, the other.
//
// A Group is safe for concurrent use by multiple goroutines; it never
// holds its lock while compile or a cache method runs.
type Group struct {
	// Locking: mu guards calls; a call's result fields are written by its
	// leader before done is closed and read by waiters only after. Nothing
	// runs compile, or a cache method, while holding mu.

	mu    sync.Mutex
	calls map[Key]*flight

	waiting func(k Key) // test hook: a caller starts waiting for a leader
}

// flight is one compile in progress and, once done is closed, its result.
type flight struct {
	done chan struct{}
	obj  Object
	err  error
}

// GetOrCompile returns the object cached in c under k, or compiles it once
// for every caller of this Group that misses k meanwhile, stores it in c
// and returns it. It behaves as the package-level GetOrCompile, with g as
// c's Group: use it for a cache that carries none.
func (g *Group) GetOrCompile(ctx context.Context, c Cache, k Key, compile CompileFunc) (Object, error) {
	if obj, ok, err := c.Get(ctx, k); err != nil || ok {
		return obj, err
	}
	for {
		g.mu.Lock()
		if f, ok := g.calls[k]; ok {
			if g.waiting != nil {
				g.waiting(k)
			}
			g.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return Object{}, ctx.Err()
			}
			// A leader whose own context ended says nothing about ours:
			// try again (errors are not shared beyond the flight).
			if isCtxErr(f.err) && ctx.Err() == nil {
				continue
			}
			return f.obj, f.err
		}
		f := &flight{done: make(chan struct{})}
		if g.calls == nil {
			g.calls = map[Key]*flight{}
		}
		g.calls[k] = f
		g.mu.Unlock()

		f.obj, f.err = lead(ctx, c, k, compile)

		g.mu.Lock()
		delete(g.calls, k)
		g.mu.Unlock()
		close(f.done)
		return f.obj, f.err
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
