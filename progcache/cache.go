package progcache

// The Cache interface and its counters. What a cache offers beyond it: the
// Group that GetOrCompile uses (Grouped, compile.go) and inspection and
// maintenance (Admin, admin.go).

import (
	"context"
)

// Cache stores compiled objects by key. Implementations in this module are
// safe for concurrent use; progcache/cachetest checks the contract.
//
// Get reports a miss as (Object{}, false, nil); a corrupt or tampered entry
// is a miss too (counted in Stats.Corrupt and removed), and so is an entry
// written under another configuration (counted in Stats.Unreadable and
// kept). Put replaces an existing entry. An object larger than the byte cap is not
// stored, evicts nothing and makes Put return an error wrapping ErrTooLarge.
// Delete of an absent key is not an error. Close is idempotent and safe to
// call concurrently with the other methods; after it every method returns
// an error wrapping ErrClosed (which errors.Is also matches with
// driver.ErrClosed), and Stats keeps answering.
type Cache interface {
	Get(ctx context.Context, k Key) (Object, bool, error)
	Put(ctx context.Context, k Key, obj Object) error
	Delete(ctx context.Context, k Key) error
	Len(ctx context.Context) (int, error)
	Clear(ctx context.Context) error
	Stats() Stats
	Close() error
}

// Stats are a cache's counters. Hits, Misses, Puts, Evictions, TooLarge,
// Corrupt and Unreadable count events seen by this cache value since it
// was opened (Admin.Totals adds those of every earlier session); Entries
// and Bytes are the current contents as far as this value knows
// (persistent backends rescan when pruning).
type Stats struct {
	Entries    int64 `json:"entries"`
	Bytes      int64 `json:"bytes"`
	MaxEntries int64 `json:"max_entries"` // 0: no cap
	MaxBytes   int64 `json:"max_bytes"`   // 0: no cap
	Hits       int64 `json:"hits"`
	Misses     int64 `json:"misses"`
	Puts       int64 `json:"puts"`
	Evictions  int64 `json:"evictions"`
	TooLarge   int64 `json:"too_large"`
	Corrupt    int64 `json:"corrupt"`    // corrupt, foreign or tampered entries removed
	Unreadable int64 `json:"unreadable"` // entries of another configuration, kept (also counted in Misses)
}
