package progcache

// GetOrCompile: one compile per key, however many callers miss at once.
//
// In a process, callers of one key on one cache share a flight: the first
// (the leader) compiles, the others wait on a channel and get its result.
// The flight state lives in the cache value (every backend here carries a
// flightGroup; other Cache implementations get one from WithSingleflight),
// so there is no package-level state.
//
// Across processes, a FileStream leader first takes a per-key lock file
// created with O_EXCL and refreshes its mtime (a heartbeat) every
// LockLease/4 while it compiles (filestream_lock.go). A process that finds
// the lock polls the cache and the lock; when the heartbeat is older than
// the holder's lease (written in the lock file) the holder is presumed
// dead and the lock is broken the way pruning removes a victim (rename to
// trash, compare identity, put back on a mismatch), so two waiters never
// remove a lock a third has just taken. A live holder keeps
// refreshing its heartbeat, so it keeps its lock however long it compiles.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
)

// CompileFunc produces the object for a key on a miss.
type CompileFunc func(ctx context.Context) (Object, error)

// flightGroup deduplicates concurrent compiles of one key.
//
// Locking: mu guards calls; a call's result fields are written by the
// leader before done is closed and read by waiters only after.
type flightGroup struct {
	mu    sync.Mutex
	calls map[Key]*flightCall

	waiting func(k Key) // test hook: a caller starts waiting for a leader
}

type flightCall struct {
	done chan struct{}
	obj  Object
	err  error
}

// grouped is implemented by caches that carry their own flight group.
type grouped interface{ flights() *flightGroup }

func (m *Memory) flights() *flightGroup     { return &m.flight }
func (c *FileStream) flights() *flightGroup { return &c.flight }
func (c *Bolt) flights() *flightGroup       { return &c.flight }

// Singleflight wraps a Cache from outside this module so that
// GetOrCompile can deduplicate compiles on it. The caches of this module
// need no wrapping. Safe for concurrent use if the wrapped cache is.
type Singleflight struct {
	Cache
	flight flightGroup
}

// WithSingleflight returns c wrapped with a flight group for GetOrCompile.
func WithSingleflight(c Cache) *Singleflight { return &Singleflight{Cache: c} }

func (s *Singleflight) flights() *flightGroup { return &s.flight }

// processLocker is implemented by caches that can lock a key across
// processes (FileStream).
type processLocker interface {
	lockKey(ctx context.Context, k Key) (unlock func(), hit *Object, err error)
	peek(ctx context.Context, k Key) (Object, bool, error) // Get without counting a miss
}

func (c *FileStream) peek(ctx context.Context, k Key) (Object, bool, error) {
	return c.get(ctx, k, false)
}

// GetOrCompile returns the object cached under k, or runs compile, stores
// its result and returns it. Concurrent callers of one key on one cache
// run compile once and share its result; on a FileStream, so do callers in
// other processes. Errors are not cached: a failed compile is retried by
// the next call. When the cache cannot store the object (over its byte
// cap, read-only, a read-only or full filesystem, no permission, something
// foreign at the entry's path) it is returned anyway with a nil error and
// not stored. A Put failure of another kind is returned together with the
// compiled object. Waiting honours ctx.
func GetOrCompile(ctx context.Context, c Cache, k Key, compile CompileFunc) (Object, error) {
	if obj, ok, err := c.Get(ctx, k); err != nil || ok {
		return obj, err
	}
	g, ok := c.(grouped)
	if !ok {
		return Object{}, fmt.Errorf("progcache: GetOrCompile on a %T: wrap it with WithSingleflight so concurrent misses compile once: %w", c, ErrInvalidConfig)
	}
	fg := g.flights()
	for {
		fg.mu.Lock()
		if call, ok := fg.calls[k]; ok {
			if fg.waiting != nil {
				fg.waiting(k)
			}
			fg.mu.Unlock()
			select {
			case <-call.done:
			case <-ctx.Done():
				return Object{}, ctx.Err()
			}
			// A leader whose own context ended says nothing about ours:
			// try again (errors are not shared beyond the flight).
			if isCtxErr(call.err) && ctx.Err() == nil {
				continue
			}
			return call.obj, call.err
		}
		call := &flightCall{done: make(chan struct{})}
		if fg.calls == nil {
			fg.calls = map[Key]*flightCall{}
		}
		fg.calls[k] = call
		fg.mu.Unlock()

		call.obj, call.err = lead(ctx, c, k, compile)

		fg.mu.Lock()
		delete(fg.calls, k)
		fg.mu.Unlock()
		close(call.done)
		return call.obj, call.err
	}
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// lead compiles for the flight, under the cross-process lock when the
// cache has one.
func lead(ctx context.Context, c Cache, k Key, compile CompileFunc) (Object, error) {
	if pl, ok := c.(processLocker); ok {
		unlock, hit, err := pl.lockKey(ctx, k)
		switch {
		case err != nil && cannotStore(err):
			// A read-only cache, or one whose lock directory cannot be
			// written: compile without the cross-process lock (and, as
			// the Put will fail the same way, without caching).
		case err != nil:
			return Object{}, err
		case hit != nil:
			return *hit, nil
		default:
			defer unlock()
			// A peer may have compiled while we waited for the lock.
			if obj, ok, err := pl.peek(ctx, k); err != nil || ok {
				return obj, err
			}
		}
	}
	obj, err := compile(ctx)
	if err != nil {
		return Object{}, err
	}
	if err := c.Put(ctx, k, obj); err != nil && !cannotStore(err) {
		return obj, err
	}
	return obj, nil
}

// cannotStore reports a Put (or lock) error that means this cache cannot
// keep the object here (too large, read-only, a foreign path, a read-only
// or full filesystem, no permission) rather than a fault: GetOrCompile
// then returns the compiled object without an error, as compiling without
// caching is what the caller wants.
func cannotStore(err error) bool {
	return errors.Is(err, ErrTooLarge) || errors.Is(err, ErrReadOnly) || errors.Is(err, ErrNotCache) ||
		errors.Is(err, fs.ErrPermission) || storeUnavailable(err)
}
