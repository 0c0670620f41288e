// Package devalloc is a caching device allocator for accelkit drivers with
// the behaviour of PyTorch's CUDACachingAllocator: 512 B rounding (and
// optional power-of-two divisions), small and large pools with PyTorch's
// segment sizes, best fit by (stream, size, address) with split and merge,
// max_split_size, stream-ordered reuse with RecordStream (through
// evpool.Deferred), an OOM path that releases the cache and retries, memory
// limits, garbage collection, expandable segments on devices with
// driver.VMM, PyTorch-named statistics and memory snapshots. By default it
// also releases cached segments no request fits before the pool grows,
// where PyTorch waits for an allocation to fail (release_before_grow).
//
// Configuration uses PyTorch's syntax, from ACCELKIT_ALLOC_CONF:
//
//	cfg, err := devalloc.ConfigFromEnv() // e.g. "expandable_segments:true,max_split_size_mb:128"
//	a, err := devalloc.New(dev, cfg)
//	p, err := a.Alloc(1<<20, stream)
//	...
//	a.RecordStream(p, other) // p is also used by work on other
//	a.Free(p)                // reused after other's queued work finishes
//
// An Allocator, and every Resource, is safe for concurrent use by multiple
// goroutines, Close included.
package devalloc
