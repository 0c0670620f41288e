// Package progcache caches compiled programs (object code such as cubin,
// PTX, LTO-IR or ELF) under keys that name everything that can change the
// compiler's output.
//
// MakeKey digests the sources, code type, target, typed Options (with
// equivalent flag spellings canonicalised), name expressions, toolchain
// versions and a caller's ExtraDigest into a 32-byte Key (SHA-256, or
// blake2b-256 on request), refusing options whose inputs the key cannot see
// or whose side outputs a cache hit would skip.
//
// The root package holds what every backend shares: keys, records, View,
// the Cache family of interfaces (Cache, Viewer, Grouped, Admin and the
// compile-once capabilities ProcessLocker and CompileLeader), Group and
// GetOrCompile, and Memory, the in-process backend. The other backends
// and tiering are packages of their own, each passing the
// progcache/cachetest conformance suite (the persistent two, its Admin
// checks too):
//
//   - Memory: an in-process LRU with entry and byte caps;
//   - progcache/filestream: a directory shared by processes and hosts,
//     with atomic commits, checksummed records, byte-capped LRU pruning
//     that never deletes an entry a peer just replaced, and every path
//     resolved from held directory handles, so no link inside the cache
//     is followed;
//   - progcache/bolt: one bbolt file, read-aware LRU, schema version,
//     corrupt files set aside and rebuilt; one process at a time. A
//     program that does not import it neither builds nor links bbolt;
//   - progcache/tiered: a local cache in front of a remote one that
//     machines share (any Cache, such as progcache/redistier's): local
//     first, remote on a local miss, the local tier backfilled from a
//     remote hit, remote puts through a bounded queue, and a remote tier
//     that fails open. With a Leaser, its GetOrCompile compiles a key once
//     across machines.
//
// Viewer.View (and ViewFrom, for any Cache) lends a stored object to a
// callback without copying it out: a hit allocates nothing on any backend.
//
// GetOrCompile runs a compile once per key however many callers miss at
// once: in a process through the cache's Group (or one kept beside a
// cache of your own); across processes on a cache that is a
// ProcessLocker (filestream's lock files); across machines on one that is
// a CompileLeader (tiered with a Leaser). A cache of any package joins by
// implementing those interfaces. Admin is what the progcache command uses
// to list, verify, prune and total a cache.
//
// Persistent entries are self-checking records (EncodeRecord,
// DecodeRecord) with a CRC-32C or a keyed MAC; nothing is deserialised by
// reflection or executed. A corrupt entry is a counted miss that is
// removed; an entry sealed by a differently configured peer (another MAC
// key, or none) is a counted miss that is kept (ErrUnreadable).
//
// Concurrency: MakeKey, EncodeRecord, DecodeRecord, GetOrCompile, the
// caches and tiered.Cache are safe for concurrent use. Key, Object, Options, KeyInput
// and the other option and result structs are plain values: safe to share
// while no one modifies them. Memory returns stored objects by reference,
// so callers must not modify an object after Put or one returned by Get;
// filestream and bolt return fresh copies from Get. A View and its slices
// are valid only until its callback returns.
package progcache
