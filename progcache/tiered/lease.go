package tiered

// Leases: compile-once across machines.
//
// progcache/filestream's lock files make processes that share one directory compile
// a key once. Machines with separate local caches share only the remote
// tier of a tiered cache, so they need a lock that lives beside it: a
// lease, taken from a service every machine can reach (a Redis SET NX with
// an expiry, for example). The lease expires unless its holder keeps it
// alive, so a holder that dies frees the key after the lease's expiry
// instead of blocking it for good. This file holds only the interfaces;
// Cache uses them (compile.go), and a lease service implements
// them.

import (
	"context"

	"github.com/accelkit/accelkit/progcache"
)

// Leaser hands out leases on keys shared by machines. Cache's
// GetOrCompile takes one around a compile, after the local cross-process
// lock, so that machines with separate local caches compile a key once.
//
// An implementation must be safe for concurrent use. Cache does not own
// its Leaser: Cache.Close leaves it open.
type Leaser interface {
	// Acquire tries to take the lease on k. It returns the Lease when it
	// took it; a nil Lease and a nil error when another holder has it; an
	// error when the lease service could not be asked (Cache then
	// compiles anyway: it fails open).
	//
	// Acquire does not wait for a holder: Cache polls, looking for the
	// holder's entry in the remote tier between attempts.
	Acquire(ctx context.Context, k progcache.Key) (Lease, error)
}

// Lease is a held lease; the Leaser keeps it alive until Release.
type Lease interface {
	// Release gives the lease up. Only the holder's release takes effect.
	//
	// A lease that expired meanwhile (its holder stalled past the expiry)
	// may have been taken by another holder; releasing it then leaves the
	// new holder's lease in place.
	Release(ctx context.Context) error
}
