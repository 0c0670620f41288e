package progcache

// Admin: the inspection and maintenance that cmd/progcache runs on a cache.

import (
	"context"
	"time"
)

// Admin is a Cache that can be inspected and maintained: what the
// progcache command uses. filestream.Cache and bolt.Cache are
// Admins, and progcache/cachetest checks this contract on every cache that
// is one. Like Cache's, these methods return an error wrapping ErrClosed
// after Close.
type Admin interface {
	Cache
	// Entries lists the entries, least recently used first, reading each
	// to report its kind and name. Without verify nothing changes, and
	// nothing counts as a hit or a miss. With verify, corrupt entries are
	// removed and counted (as Get would) and foreign things are set
	// aside; it needs a writable cache (ErrReadOnly otherwise). Entries
	// of another configuration are reported and always kept.
	Entries(ctx context.Context, verify bool) ([]EntryInfo, error)
	// Prune evicts least recently used entries until the cache's bytes fit
	// in maxBytes, and returns how many it evicted, counted in
	// Stats.Evictions. A maxBytes of 0 evicts nothing; a negative one is
	// an error wrapping ErrInvalidConfig.
	Prune(ctx context.Context, maxBytes int64) (int, error)
	// Totals returns the counters of every session that used the cache's
	// storage, this one's included, like ccache -s, and the current
	// entries and bytes.
	Totals(ctx context.Context) (Stats, error)
}

// EntryInfo describes one entry on disk, or one foreign thing where the
// cache keeps its entries, for listing and verification.
type EntryInfo struct {
	// Key is the key the entry is stored under (zero for a foreign thing).
	Key Key `json:"key"`
	// Size is the stored record's size in bytes.
	Size int64 `json:"size"`
	// Used is the entry's last use as the cache records it (filestream: the
	// file's mtime, refreshed at most once a minute; Bolt: the access
	// time).
	Used time.Time `json:"used"`
	// Kind, Name and CodeLen describe the object of a readable entry.
	Kind    string `json:"kind,omitempty"`
	Name    string `json:"name,omitempty"`
	CodeLen int    `json:"code_len"`
	// Err says why the entry could not be read; empty for a good entry.
	Err string `json:"error,omitempty"`
	// Unreadable is set when the entry was written under another
	// configuration (ErrUnreadable): not corrupt, and never removed.
	Unreadable bool `json:"unreadable,omitempty"`
	// Foreign is set for something the cache did not write where it keeps
	// its own (a link, a pipe, a stray file or directory); Path names it
	// relative to the cache. Verification moves it to aside/, never
	// deletes it.
	Foreign bool   `json:"foreign,omitempty"`
	Path    string `json:"path,omitempty"`
	// MovedTo is where verification set a foreign thing aside.
	MovedTo string `json:"moved_to,omitempty"`
}
