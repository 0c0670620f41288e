// Package wrlru is JAX's weakref_lru_cache in Go: a memoising LRU cache
// keyed by a weak reference to an object plus comparable arguments.
//
//	c, err := wrlru.New(func(ctx context.Context, f *Func, sig Signature) (*Compiled, error) {
//		return compile(ctx, f, sig)
//	}, wrlru.Options{})
//	exe, err := c.Get(ctx, f, sig)
//
// The cache never keeps its key objects alive: it stores their address and a
// weak.Pointer, and registers a runtime.AddCleanup on each object that drops
// the object's entries once it is collected. The cleanup holds the cache only
// weakly too, so a dropped cache is collected while its key objects live.
// Values must not reference their key object (a value that does keeps the
// object, and its entries, alive).
//
// Behaviour:
//
//   - LRU bound over all entries (Options.MaxSize: DefaultMaxSize when 0,
//     none when Unbounded), exact at every instant even though the cache is
//     sharded: inserts reserve a slot in one atomic count before they land.
//   - With one shard and its own bound (Options{Shards: 1}, and the default
//     for bounds under 128) eviction is exact LRU. Otherwise recency counts in
//     inserts (entries used since the same insert tie) and the victim is
//     the oldest of a few sampled shards' oldest entries (see Budget).
//   - Concurrent misses of one key call fn once; the others wait and may give
//     up through their context. Errors reach every waiter and are not cached.
//     A panic in fn goes on in the computing goroutine; its waiters get
//     ErrPanicked.
//   - Evict and Clear also drop computations in flight, as JAX does: their
//     values reach their callers and waiters but are not cached.
//   - Arguments whose hash panics (an interface holding a slice) make Get
//     panic as a map would, leaving the cache usable; arguments not equal
//     to themselves (a NaN) are computed on every call, never cached.
//   - A computation that asks for its own key through the context it was
//     given gets ErrRecursive instead of deadlocking.
//   - Info, Clear, Keys and Evict as in JAX (cache_info, cache_clear,
//     cache_keys, evict_weakref).
//
// Hits take no lock: they read an immutable per-shard view of the entries
// and write nothing other cores share, so they scale with cores. See the
// README for the locking design and figures.
//
// Key objects should be at least 16 bytes or contain pointers: Go's tiny
// allocator packs small pointer-free objects into shared blocks, and such an
// object may not be collected (nor its entries dropped) while a neighbour
// lives. New refuses zero-size key types, which share addresses.
package wrlru
