// Package filestream is a progcache cache in a directory shared by
// processes and hosts: atomic commits, checksummed records, byte-capped
// LRU pruning that never deletes an entry a peer just replaced, and every
// path resolved from held directory handles, so no link inside the cache
// is followed.
//
// A Cache implements progcache's Cache, Viewer, Grouped, Admin and
// ProcessLocker: progcache.GetOrCompile finds its per-key lock files by
// type assertion, so callers in other processes that share the directory
// compile a key once too.
//
// Errors begin "filestream:" and wrap progcache's sentinels (ErrClosed,
// ErrReadOnly, ErrNotCache, ErrTooLarge, ErrInvalidConfig).
package filestream

// Files: cache.go (the Cache, Options and the directory's layout), read.go
// (Get and View), commit.go (how a record is written and renamed into
// place), lock.go (GetOrCompile's cross-process lock), scan.go, prune.go,
// verify.go and stats.go (the Admin side), and dir_*.go and entry_*.go
// (held directories and entry files, per platform).
