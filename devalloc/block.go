package devalloc

// Blocks, segments and free sets: the data the allocator's cache is made
// of. Every field here is guarded by Allocator.mu.

import (
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

const (
	stateFree blockState = iota
	stateAllocated
	statePendingFree // freed by the caller, waiting for noted streams
	stateUnmapped    // a hole in an expandable range: address space only
)

type blockState uint8

// block is a piece of a segment. Guarded by Allocator.mu.
//
// It is 128 bytes, so the allocator's size class aligns it to 64, and the
// fields a cache hit reads and writes (best fit, split, merge, the class
// heap and the free lists' membership) fill its first 64-byte line: a hit
// pair touches several blocks that are rarely in the cache, and each costs
// one line instead of three (TestBlockLayout).
type block struct {
	ptr        driver.Ptr
	size       uint64
	prev, next *block
	set        *freeSet // seg.set, kept here so that Free need not load seg
	// hgen is the generation of its class heap entry (blockSet's
	// classHeap): odd while it is placed in a class heap.
	hgen  uint32
	state blockState
	rlist uint8 // the release list it is on while free (index.go)
	// own: reusable the moment it is freed, while allocated: allocated on
	// its owner's stream (evpool.SameStream) and noted by RecordStream on
	// no other. Free tests only this, so a hit pair never reads the
	// second line.
	own       bool
	exp       bool   // seg.exp != nil, kept here so that a hit need not load seg
	requested uint64 // bytes asked for, while allocated
	freedAt   uint64 // when last freed, in frees (releaseIndex.nextFreed): the release order
	// The second line.
	allocStream driver.Stream     // while allocated, unless own was set at commit: then the owner's (stream)
	uses        *evpool.StreamSet // streams noted by RecordStream, less the owner; nil when none
	rprev       *block            // neighbours on the release list
	rnext       *block
	pcs         *[]uintptr // allocating stack while live, when block stacks are recorded (history.go)
	seg         *segment
	_           [8]byte // to 128 bytes (TestBlockLayout)
}

// stack is b's allocating stack, or nil.
func (b *block) stack() []uintptr {
	if b.pcs == nil {
		return nil
	}
	return *b.pcs
}

// stream is the stream b was allocated on. b allocated or pending free.
func (b *block) stream() driver.Stream {
	if b.allocStream != nil {
		return b.allocStream
	}
	return b.set.stream
}

// segment is one driver allocation, or one expandable virtual range.
type segment struct {
	ptr        driver.Ptr
	size       uint64 // bytes; for an expandable range, its reserved address space
	set        *freeSet
	head, tail *block
	exp        *expandable
}

type setKey struct {
	stream uint64
	small  bool
}

// freeSet is the cache of one (stream, pool). Guarded by Allocator.mu.
type freeSet struct {
	stream driver.Stream
	free   blockSet // right after stream: one line holds what a hit reads
	id     uint64   // stream.ID()
	small  bool
	segs   map[*segment]struct{}
	exps   []*segment // expandable ranges, oldest first
	// pins counts grows in flight with mu released (growLocked): the set
	// is not dropped under them.
	pins             int
	dropped          bool
	prevSet, nextSet *freeSet // Allocator's set list, creation order
	// dead holds blocks absorbed by a merge, reused by the next split so
	// that a cache hit does not allocate. A merged-away free block is
	// referenced by nothing else: free blocks are in no pointer map or
	// pending free, snapshots and history copy values, not *block, and
	// garbageCollect rechecks its candidates' ptr under the lock.
	dead []*block
}

// maxDeadBlocks bounds fs.dead: enough for the split/merge churn of a
// busy set, small enough that a set that shrank holds little garbage.
const maxDeadBlocks = 64

// newBlock returns a recycled block, or a new one. a.mu held.
func (fs *freeSet) newBlock() *block {
	if n := len(fs.dead); n > 0 {
		b := fs.dead[n-1]
		fs.dead[n-1] = nil
		fs.dead = fs.dead[:n-1]
		return b
	}
	return new(block)
}

// recycle keeps b, just merged away, for a later split. It keeps b's
// heap generation, as every reuse of a block does, so that a stale heap
// entry that still names b never matches it again. a.mu held.
func (fs *freeSet) recycle(b *block) {
	if len(fs.dead) < maxDeadBlocks {
		*b = block{hgen: b.hgen}
		fs.dead = append(fs.dead, b)
	}
}

func poolIdx(small bool) int {
	return poolLarge - int(boolBit(small)) // no branch on the hit path
}

// absorb merges n, b's neighbour in the same state, into b. a.mu held.
func absorb(b, n *block) {
	if n == b.prev {
		b.ptr = n.ptr
		b.prev = n.prev
		if b.prev != nil {
			b.prev.next = b
		} else {
			b.seg.head = b
		}
	} else {
		b.next = n.next
		if b.next != nil {
			b.next.prev = b
		} else {
			b.seg.tail = b
		}
	}
	b.size += n.size
}

// insertAfter links n into b's segment right after b. a.mu held.
func insertAfter(b, n *block) {
	n.prev, n.next = b, b.next
	if b.next != nil {
		b.next.prev = n
	} else {
		b.seg.tail = n
	}
	b.next = n
}

// insertBefore links n into b's segment right before b. a.mu held.
func insertBefore(b, n *block) {
	n.prev, n.next = b.prev, b
	if b.prev != nil {
		b.prev.next = n
	} else {
		b.seg.head = n
	}
	b.prev = n
}
