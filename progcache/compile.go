package progcache

// GetOrCompile: look up, and on a miss compile once and store.
//
// The in-process half, one compile per key however many callers miss at
// once, is Group (group.go); every cache of this module carries one. The
// rest is capabilities a cache may have, found by type assertion, so a
// cache of any package can join: a ProcessLocker (progcache/filestream's
// per-key lock files, filestream/lock.go) makes callers in other processes
// wait for its Group leader's compile too, and the leader looks at the
// cache again once it holds the lock, since a peer may have stored the
// object meanwhile; a CompileLeader (progcache/tiered, tiered/compile.go)
// leads its flights itself: its local tier's lock, then a lease that
// machines share.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
)

// CompileFunc produces the object for a key on a miss.
type CompileFunc func(ctx context.Context) (Object, error)

// Grouped is a Cache that carries the Group that GetOrCompile uses for
// it. Memory, filestream.Cache, bolt.Cache and tiered.Cache are Grouped; a cache
// of your own can be, by holding a Group and returning it.
type Grouped interface {
	Cache
	// Group returns the cache's Group: the same one on every call.
	Group() *Group
}

// GetOrCompile returns the object cached under k, or runs compile, stores
// its result and returns it, through c's own Group: concurrent callers of
// one key on one cache run compile once and share its result; on a
// ProcessLocker (filestream.Cache), so do callers in other processes,
// and on a CompileLeader (tiered.Cache with a Leaser), callers on other
// machines. Errors are not cached: a
// failed compile is retried by the next call. When the cache cannot store
// the object (over its byte cap, read-only, a read-only or full
// filesystem, no permission, something foreign at the entry's path) it is
// returned anyway with a nil error and not stored. A Put failure of
// another kind is returned together with the compiled object. Waiting
// honours ctx.
//
// A cache that is not Grouped is refused with an error wrapping
// ErrInvalidConfig, since nothing would stop two misses compiling twice:
// keep a Group beside it and call Group.GetOrCompile instead.
func GetOrCompile(ctx context.Context, c Cache, k Key, compile CompileFunc) (Object, error) {
	g, ok := c.(Grouped)
	if !ok {
		return Object{}, fmt.Errorf("progcache: GetOrCompile on a %T, which has no Group method: keep a progcache.Group beside the cache and call its GetOrCompile, so concurrent misses compile once: %w", c, ErrInvalidConfig)
	}
	return g.Group().GetOrCompile(ctx, c, k, compile)
}

// ProcessLocker is a Cache that can lock a key across processes, so that
// processes sharing it compile a key once (progcache/filestream's lock
// files). GetOrCompile finds it by type assertion: a Group's leader takes
// the lock before it compiles and looks at the cache again once it holds
// it (LockForCompile). A cache of any package can implement it.
type ProcessLocker interface {
	Cache
	// LockKey takes k's lock, waiting while a live holder has it. It
	// returns the unlock to call once the compiled object is stored; or,
	// when a holder stored k meanwhile, that object (hit non-nil) with
	// nothing held; or an error. An error that CannotStore accepts (a
	// read-only cache, a lock that cannot be written) means no lock can be
	// taken here: the compile then runs unlocked and is not stored.
	LockKey(ctx context.Context, k Key) (unlock func(), hit *Object, err error)
	// Peek is Get without counting a lookup: the leader's look at the cache
	// once it holds the lock, after the miss it already counted.
	Peek(ctx context.Context, k Key) (Object, bool, error)
}

// CompileLeader is a Cache that compiles for a Group's flight itself
// (progcache/tiered: its local tier's lock, then a lease that machines
// share). GetOrCompile finds it by type assertion and calls LeadCompile
// instead of its own lock, compile and Put.
type CompileLeader interface {
	Cache
	// LeadCompile returns k's object: one that another process or machine
	// stored meanwhile, or compile's, which it stores. As GetOrCompile, it
	// returns the object with a nil error when the cache cannot store it
	// (CannotStore), and with the error when a Put fails otherwise.
	LeadCompile(ctx context.Context, k Key, compile CompileFunc) (Object, error)
}

// lead compiles for a Group's flight, under the cross-process lock when
// the cache has one.
func lead(ctx context.Context, c Cache, k Key, compile CompileFunc) (Object, error) {
	if cl, ok := c.(CompileLeader); ok {
		return cl.LeadCompile(ctx, k, compile)
	}
	unlock, hit, err := LockForCompile(ctx, c, k)
	if err != nil || hit != nil {
		return derefHit(hit), err
	}
	defer unlock()
	obj, err := compile(ctx)
	if err != nil {
		return Object{}, err
	}
	if err := c.Put(ctx, k, obj); err != nil && !CannotStore(err) {
		return obj, err
	}
	return obj, nil
}

// LockForCompile takes c's cross-process lock on k when c is a
// ProcessLocker, and looks at c again once it holds it (Peek), since a
// peer may have stored the object meanwhile. It returns the unlock to call
// after the compile and its Put; or the peer's object instead (hit, with
// nothing held); or an error. A cache without the lock, or one that cannot
// take it (an error CannotStore accepts: the Put would fail the same way,
// so the compile is not cached), gets a no-op unlock. A CompileLeader
// calls it on the cache it compiles into, as tiered does on its local
// tier.
func LockForCompile(ctx context.Context, c Cache, k Key) (unlock func(), hit *Object, err error) {
	pl, ok := c.(ProcessLocker)
	if !ok {
		return func() {}, nil, nil
	}
	unlock, hit, err = pl.LockKey(ctx, k)
	switch {
	case err != nil && CannotStore(err):
		return func() {}, nil, nil
	case err != nil:
		return nil, nil, err
	case hit != nil:
		return nil, hit, nil
	}
	// A peer may have compiled while we waited for the lock.
	obj, ok, err := pl.Peek(ctx, k)
	if err != nil || ok {
		unlock()
		if err != nil {
			return nil, nil, err
		}
		return nil, &obj, nil
	}
	return unlock, nil, nil
}

// derefHit returns *hit, or the zero Object for a nil hit.
func derefHit(hit *Object) Object {
	if hit == nil {
		return Object{}
	}
	return *hit
}

// CannotStore reports a Put (or LockKey) error that means a cache cannot
// keep the object here (too large, read-only, a foreign path, a read-only
// or full filesystem, no permission, by the system's own error codes)
// rather than a fault: GetOrCompile
// then returns the compiled object without an error, as compiling without
// caching is what the caller wants.
func CannotStore(err error) bool {
	return errors.Is(err, ErrTooLarge) || errors.Is(err, ErrReadOnly) || errors.Is(err, ErrNotCache) ||
		errors.Is(err, fs.ErrPermission) || storeUnavailable(err)
}
