package hostpin

// Buffers: the Buffer handed to callers, and the block of pinned memory
// behind it (a driver allocation of its own, or a piece of a slab).

import (
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

// Buffer is one allocation from an Allocator or a Direct. Bytes has the
// requested length; the memory stays valid until Free (and, after
// RecordStream, may be read or written by the recorded streams' queued work
// until it runs).
//
// A Buffer may be passed between goroutines; Free and RecordStream on one
// Buffer are safe to call concurrently (the allocator serialises them), but
// Bytes after a successful Free is a use after free.
type Buffer struct {
	c   *core // the allocator that handed it out
	blk *block
	n   int

	// guarded by c.mu
	freed   bool
	streams evpool.StreamSet // kept through Free: an undone Free hands them back
}

// Bytes returns the buffer's memory, of the requested length. Its capacity
// is its length, so appending never writes past it into a neighbour.
func (b *Buffer) Bytes() []byte {
	if b.blk == nil {
		return nil
	}
	return b.blk.mem[:b.n:b.n]
}

// Len is the requested length.
func (b *Buffer) Len() int { return b.n }

// Cap is the size of the pinned block behind the buffer: the class or page
// rounded size, a cached block up to 1.25x the request, or the exact size
// from a Direct.
func (b *Buffer) Cap() int {
	if b.blk == nil {
		return 0
	}
	return len(b.blk.mem)
}

type blockState uint8

const (
	stateIdle blockState = iota
	stateInUse
	statePending // freed, waiting for its streams' work
)

// block is one pinned region handed out whole: a HostBuffer of its own
// (hb != nil) or a piece of a slab. Its state is guarded by core.mu.
type block struct {
	mem    []byte
	hb     *driver.HostBuffer
	slab   *slab
	bucket int
	state  blockState

	prev, next *block  // bucket free list, while idle (cache.go)
	age        ageNode // age list, standalone blocks only (eviction.go)
}
