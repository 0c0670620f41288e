// Package tiered puts a local progcache cache in front of a remote one
// that machines share (any progcache.Cache, such as progcache/redistier's):
// local first, remote on a local miss, the local tier backfilled from a
// remote hit, remote puts through a bounded queue, and a remote tier that
// fails open.
//
// With a Leaser (a lease service every machine can reach: a
// progcache/redistier Cache is one), a Cache's GetOrCompile compiles a key once
// across machines: the Cache is a progcache.CompileLeader, which
// progcache's Group finds by type assertion, and it takes its local
// tier's cross-process lock (progcache.LockForCompile) before the lease.
//
// A Cache is safe for concurrent use by multiple goroutines. Its errors
// begin "tiered:" and wrap progcache's sentinels (ErrClosed,
// ErrInvalidConfig).
package tiered

// Files: cache.go (the Cache, Options, TierStats), compile.go
// (LeadCompile: compile-once across machines), lease.go (Leaser, Lease),
// prefetch.go (Prefetch, Prefetcher), queue.go (the remote put queue).
