// Package bolt is a progcache.Cache in one bbolt file, for one process:
// entries are progcache's self-checking records, the LRU order is
// read-aware (hits are remembered and their access times written in
// batches), the byte cap counts record bytes, and a damaged file of this
// package is set aside and rebuilt instead of crashing the process.
//
//	c, err := bolt.Open(path, bolt.Options{MaxBytes: 1 << 30})
//	obj, err := progcache.GetOrCompile(ctx, c, k, compile)
//
// Only one process may open a file read-write at a time (others wait up to
// Options.Timeout, then get ErrLocked), and the file must not live on a
// network filesystem: use filestream.Cache to share a cache between
// processes or hosts.
//
// It is a package of its own, not part of progcache, so that a program
// that uses only progcache.Memory or filestream.Cache neither builds
// nor links bbolt.
//
// Cache is safe for concurrent use, implements progcache.Admin (what the
// progcache command uses) and progcache.Grouped, and passes
// progcache/cachetest.
package bolt
