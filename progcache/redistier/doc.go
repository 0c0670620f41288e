// Package redistier is a progcache.Cache on Redis: a program cache shared
// by every machine of a fleet, so that a program compiled on one is a hit
// on the others.
//
// New takes the caller's redis.UniversalClient (a single node, a
// Sentinel failover client or a Cluster client, with its TLS and ACL
// settings) and Options. Entries are progcache records, sealed with a MAC
// key: a cache shared by machines is a place where one could plant
// programs for another, so New refuses to open without a key unless
// Options.TrustedNetworkNoMAC says the network is trusted.
//
// The cache fails open. A Get that Redis cannot serve (down, slow past
// Options.Timeout, erroring, or refused by the open circuit breaker) is a
// counted miss, never an error; a corrupt or forged entry is a counted
// miss that is deleted. So is a value that cannot be an entry (over
// MaxEntryBytes, or not a string). A reply that declares more than the
// entry cap is refused before go-redis allocates it (Cache.Guarded says
// which connections this covers). Writes report such failures as errors wrapping
// ErrUnavailable, for the caller to count. RedisStats shows every counter
// and the breaker's state.
//
// AcquireLease takes a lease on a key (SET NX with expiry, extended by a
// heartbeat, released by compare-and-delete), so that processes on
// different machines missing the same key compile it once; Acquire is the
// same as a tiered.Leaser, so that a Cache is both the remote tier and
// the lease service of a progcache/tiered Cache, whose GetOrCompile then
// compiles each key once across the fleet. Prefetch fetches
// many keys in few round trips for a warm start. Options.Namespace
// separates deployments on one server, Options.TTL expires entries,
// Options.MaxEntryBytes caps an entry and Options.MaxBytes a namespace.
//
// Concurrency: Cache and Lease are safe for concurrent use; Options and
// Stats are plain values.
package redistier

// The files: cache.go (Cache, New and the progcache.Cache methods),
// options.go, keyspace.go (the key layout), call.go (one Redis call: the
// timeout and what a failure counts as), breaker.go, index.go (the
// MaxBytes budget), scan.go (Len and Clear over every master), lease.go,
// prefetch.go, stats.go, errors.go, guard.go (the reply guard: a dial hook
// New adds to the client) and resp.go (its RESP length scanner).
