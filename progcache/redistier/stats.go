package redistier

import (
	"sync/atomic"

	"github.com/accelkit/accelkit/progcache"
)

// Stats are the cache's counters: progcache's, and the remote tier's own.
// Every counter counts events seen by this Cache value since New.
//
// Of the embedded progcache.Stats, Entries and Bytes stay zero: the server
// holds the entries (Len asks it), and other machines change them.
// MaxBytes is Options.MaxBytes; Evictions counts the entries this value
// evicted to keep within it (Redis's own maxmemory evictions show in the
// server's INFO stats, as evicted_keys). Misses include lookups that
// failed (Errors, Timeouts, Rejected): a failed Get is a miss.
type Stats struct {
	progcache.Stats

	// Errors counts failed Redis calls: no answer in time (also counted
	// in Timeouts), a network error, or an error reply.
	Errors int64 `json:"errors"`
	// Timeouts counts calls that did not finish within Options.Timeout.
	Timeouts int64 `json:"timeouts"`
	// Rejected counts calls that the open breaker refused.
	Rejected int64 `json:"rejected"`
	// Abandoned counts calls that passed their Timeout while the client
	// was still waiting for the server (a client without
	// ContextTimeoutEnabled): they finish in the background, within the
	// client's own ReadTimeout.
	Abandoned int64 `json:"abandoned"`
	// Breaker is the breaker's state now; BreakerOpens counts the times it
	// opened.
	Breaker      BreakerState `json:"breaker"`
	BreakerOpens int64        `json:"breaker_opens"`

	// CorruptDeleted counts corrupt entries (also in Corrupt) that this
	// value deleted; one that another writer had replaced meanwhile is
	// counted in Corrupt only, and stays.
	CorruptDeleted int64 `json:"corrupt_deleted"`
	// Oversized counts values over Options.MaxEntryBytes found under an
	// entry's name (also in Corrupt): refused by the reply guard before
	// they were read, or read on a connection it does not cover. Each is
	// a miss, and is deleted if it is still over the cap (CorruptDeleted).
	// A value of another type than string there (WRONGTYPE) is counted in
	// Corrupt and deleted the same way.
	Oversized int64 `json:"oversized"`
	// PutErrors counts Puts that failed for want of Redis (those that
	// returned ErrUnavailable).
	PutErrors int64 `json:"put_errors"`
	// Prefetched counts objects delivered by Prefetch; PrefetchMisses the
	// keys it asked for and did not find (or found unusable).
	Prefetched     int64 `json:"prefetched"`
	PrefetchMisses int64 `json:"prefetch_misses"`

	// LeasesAcquired counts Acquire calls that took the lease;
	// LeasesContended those that found another holder.
	LeasesAcquired  int64 `json:"leases_acquired"`
	LeasesContended int64 `json:"leases_contended"`
	// LeasesStale counts leases that Acquire took over (also in
	// LeasesAcquired) because no holder of ours could have set them: one
	// without an expiry, or with more than MaxLeaseTTL left.
	LeasesStale int64 `json:"leases_stale"`
	// LeasesReleased counts leases released by their holder while still
	// held; LeasesLost those found taken over or expired (by a heartbeat,
	// or at Release).
	LeasesReleased int64 `json:"leases_released"`
	LeasesLost     int64 `json:"leases_lost"`
	// HeartbeatFailures counts lease extensions that could not reach
	// Redis.
	HeartbeatFailures int64 `json:"heartbeat_failures"`
}

// counters are the atomics behind Stats; the breaker keeps its own.
type counters struct {
	hits, misses, puts, evictions, tooLarge, corrupt, unreadable atomic.Int64

	errors, timeouts, rejected, abandoned atomic.Int64
	corruptDeleted, putErrors, oversized  atomic.Int64
	prefetched, prefetchMisses            atomic.Int64
	leasesAcquired, leasesContended       atomic.Int64
	leasesStale                           atomic.Int64
	leasesReleased, leasesLost            atomic.Int64
	heartbeatFailures                     atomic.Int64
}

func (c *counters) stats() Stats {
	return Stats{
		Stats: progcache.Stats{
			Hits:       c.hits.Load(),
			Misses:     c.misses.Load(),
			Puts:       c.puts.Load(),
			Evictions:  c.evictions.Load(),
			TooLarge:   c.tooLarge.Load(),
			Corrupt:    c.corrupt.Load(),
			Unreadable: c.unreadable.Load(),
		},
		Errors:            c.errors.Load(),
		Timeouts:          c.timeouts.Load(),
		Rejected:          c.rejected.Load(),
		Abandoned:         c.abandoned.Load(),
		CorruptDeleted:    c.corruptDeleted.Load(),
		Oversized:         c.oversized.Load(),
		PutErrors:         c.putErrors.Load(),
		Prefetched:        c.prefetched.Load(),
		PrefetchMisses:    c.prefetchMisses.Load(),
		LeasesAcquired:    c.leasesAcquired.Load(),
		LeasesContended:   c.leasesContended.Load(),
		LeasesStale:       c.leasesStale.Load(),
		LeasesReleased:    c.leasesReleased.Load(),
		LeasesLost:        c.leasesLost.Load(),
		HeartbeatFailures: c.heartbeatFailures.Load(),
	}
}
