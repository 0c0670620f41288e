package hostpin

// Slabs. Classes below slabClassLimit (64 KiB) are carved from shared slabs
// of slabSize (1 MiB), one class per slab: those class sizes (5, 6, 7 KiB,
// ...) are not page multiples, and a small driver allocation costs as much
// as a large one (0.82 ms for 4 KiB against 0.83 ms for 1 MiB on an H100
// machine), so one driver call buys a whole slab of buffers. A slab goes
// back to the driver only as a whole, once every piece is idle (eviction.go).

import "github.com/accelkit/accelkit/driver"

const (
	// slabClassLimit: classes below it are carved from slabs. From 64 KiB up
	// every class is a page multiple and a driver call is cheap beside the
	// copies such a buffer serves.
	slabClassLimit = 64 << 10

	// slabSize is the driver allocation carved into small buffers: it costs
	// the same driver time as 4 KiB (see above) and holds 18 buffers of the
	// largest slab class, 256 of the smallest.
	slabSize = 1 << 20
)

// slab is a driver allocation carved into equal blocks of one class.
// busy and the pieces' states are guarded by core.mu.
type slab struct {
	hb     *driver.HostBuffer
	pieces []*block
	busy   int // pieces not idle
	age    ageNode
}

// allocSlab gets a fresh slab of class want, hands out its first piece and
// caches the rest.
func (a *Allocator) allocSlab(want int) (*block, error) {
	hb, err := a.hostAlloc(slabSize, a.releaseIdle)
	if err != nil {
		return nil, err
	}
	mem := hb.Bytes()
	sl := &slab{hb: hb, pieces: make([]*block, slabSize/want)}
	sl.age.slab = sl
	bucket := bucketIndex(want, a.perDbl)
	for i := range sl.pieces {
		sl.pieces[i] = &block{mem: mem[i*want : (i+1)*want : (i+1)*want], slab: sl, bucket: bucket}
	}
	a.mu.Lock()
	first := sl.pieces[0]
	for _, p := range sl.pieces[1:] {
		a.buckets[bucket].push(p)
		a.stats.BytesCached += int64(want)
	}
	sl.busy = 1
	a.useFreshLocked(first)
	victims := a.trimLocked()
	a.mu.Unlock()
	// The allocation succeeded; units the cap evicted are out of the cache
	// (and counted in Stats) whether or not the driver's free of them fails.
	_ = a.freeUnits(victims)
	return first, nil
}
