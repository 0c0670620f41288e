package devalloc

// The passthrough resource: no cache at all, every Alloc a device Malloc
// and every Free a device Free. It is the baseline the caching Allocator
// is measured against (PyTorch's backend:native against plain cudaMalloc),
// and a way to take caching out of a program when hunting a bug. It is a
// resource of its own, as RMM composes cuda_memory_resource beside
// pool_memory_resource, rather than a mode flag tested on the caching
// allocator's hot path.

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/evpool"
)

// Resource is what a device memory resource of this package offers: the
// caching Allocator and the uncached Passthrough. Open returns one,
// picked by Config.Backend, for programs that choose the backend from
// configuration text (ACCELKIT_ALLOC_CONF=backend:passthrough) as PyTorch
// does from PYTORCH_CUDA_ALLOC_CONF. Code that always caches uses
// *Allocator directly.
type Resource interface {
	Device() driver.Device
	Alloc(size uint64, s driver.Stream) (driver.Ptr, error)
	Free(p driver.Ptr) error
	RecordStream(p driver.Ptr, s driver.Stream) error
	HoldsStream(s driver.Stream) bool
	Poll() int
	Drain() error
	EmptyCache() error
	Stats() Stats
	Close() error
}

var (
	_ Resource = (*Allocator)(nil)
	_ Resource = (*Passthrough)(nil)
)

// Open returns the resource cfg.Backend names for dev: an *Allocator for
// BackendNative, a *Passthrough for BackendPassthrough. It fails on an
// invalid cfg, and on a passthrough cfg with any other setting (those are
// the caching allocator's; ignoring them would hide a typo'd backend).
func Open(dev driver.Device, cfg Config) (Resource, error) {
	if cfg.Backend == BackendPassthrough {
		if other := (Config{Backend: BackendPassthrough}); cfg != other {
			set := strings.TrimPrefix(cfg.String(), other.String()+",")
			return nil, fmt.Errorf("%w: backend passthrough takes no other setting, got %s (settings of the caching allocator, backend native)", ErrConfig, set)
		}
		return NewPassthrough(dev)
	}
	return New(dev, cfg)
}

// Passthrough allocates every request from the device and frees it back
// at Free, after waiting on the host for the streams that used it (as
// cudaFree synchronises). It caches nothing: EmptyCache, Poll and Drain
// have nothing to do. Its Stats count like the Allocator's, with one
// segment per allocation and Backend "passthrough".
//
// Passthrough is safe for concurrent use, Close included.
type Passthrough struct {
	// Locking: mu
	// guards live and st; no driver call is made under it.

	dev driver.Device

	mu     sync.Mutex
	live   map[driver.Ptr]*passBlock
	st     counters
	closed atomic.Bool
}

// passBlock is one live allocation of a Passthrough.
type passBlock struct {
	size   uint64
	stream driver.Stream    // the allocation stream
	uses   evpool.StreamSet // streams noted by RecordStream
}

// NewPassthrough returns a passthrough resource for dev.
func NewPassthrough(dev driver.Device) (*Passthrough, error) {
	if dev == nil {
		return nil, fmt.Errorf("devalloc: nil device: %w", driver.ErrInvalidValue)
	}
	return &Passthrough{dev: dev, live: map[driver.Ptr]*passBlock{}}, nil
}

// Device returns the resource's device.
func (r *Passthrough) Device() driver.Device { return r.dev }

// passDelta is the stats change of one allocation of size bytes (sign 1)
// or its free (sign -1): an allocation, a segment and an active block.
func passDelta(size uint64, sign int64) *delta {
	d := &delta{pool: poolIdx(size <= kSmallSize)}
	for _, k := range []int{stAllocation, stSegment, stActive} {
		d.add(k, sign)
	}
	for _, k := range []int{stAllocatedBytes, stReservedBytes, stActiveBytes, stRequestedBytes} {
		d.add(k, sign*int64(size))
	}
	if sign > 0 {
		d.deviceAllocs, d.allocs, d.largest = 1, 1, size
	} else {
		d.deviceFrees = 1
	}
	return d
}

// Alloc allocates size bytes from the device for use on s (nil: the
// default stream). Alloc(0, s) returns (0, nil). A failed device
// allocation is an *OOMError.
func (r *Passthrough) Alloc(size uint64, s driver.Stream) (driver.Ptr, error) {
	if size == 0 {
		return 0, nil
	}
	s, err := checkAlloc(r.dev, &r.closed, size, s)
	if err != nil {
		return 0, err
	}
	p, err := r.dev.Malloc(size)
	if err != nil {
		if errors.Is(err, driver.ErrOutOfMemory) {
			return 0, r.oom(size, s, err)
		}
		return 0, fmt.Errorf("devalloc: passthrough alloc %d bytes on stream %d: %w", size, s.ID(), err)
	}
	r.mu.Lock()
	r.live[p] = &passBlock{size: size, stream: s}
	r.st.apply(passDelta(size, 1))
	r.mu.Unlock()
	return p, nil
}

func (r *Passthrough) oom(size uint64, s driver.Stream, cause error) error {
	free, total, _ := r.dev.MemInfo()
	r.mu.Lock()
	r.st.numOOMs++
	live := uint64(r.st.array(stAllocatedBytes).All().Current)
	r.mu.Unlock()
	e := &OOMError{
		Device: r.dev.Ordinal(), Stream: s.ID(), Requested: size, Rounded: size,
		DeviceFree: free, DeviceTotal: total, Allocated: live, Reserved: live, Cause: cause,
	}
	if e.Advice = tooLarge(e); e.Advice == "" {
		e.Advice = whereUsed(e, "the passthrough resource caches nothing, so free live allocations or use a smaller request")
	}
	return e
}

// RecordStream notes that work on s (nil: the default stream) uses the
// memory at p, so that Free waits for it. p == 0 is a no-op; an unknown
// pointer is an error wrapping driver.ErrInvalidPointer.
func (r *Passthrough) RecordStream(p driver.Ptr, s driver.Stream) error {
	s, err := resolveStream(r.dev, s, "passthrough record stream")
	if err != nil || p == 0 {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.live[p]
	if b == nil {
		return fmt.Errorf("devalloc: passthrough record stream %d on %v: not a live allocation of this resource: %w", s.ID(), p, driver.ErrInvalidPointer)
	}
	if !evpool.SameStream(s, b.stream) {
		b.uses.Add(s)
	}
	return nil
}

// Free waits on the host for the allocation stream and the noted streams,
// then frees p on the device. When a wait or the device Free fails, p
// stays live and the caller's, and the error says so. Free(0) is a no-op;
// an unknown or already freed pointer wraps driver.ErrInvalidPointer.
// Free works after Close.
func (r *Passthrough) Free(p driver.Ptr) error {
	if p == 0 {
		return nil
	}
	r.mu.Lock()
	b := r.live[p]
	delete(r.live, p)
	r.mu.Unlock()
	if b == nil {
		return fmt.Errorf("devalloc: passthrough free %v: not a live allocation of this resource (unknown pointer or double free): %w", p, driver.ErrInvalidPointer)
	}
	var wait evpool.StreamSet
	wait.Add(b.stream)
	wait.AddSet(b.uses)
	for _, s := range wait.Streams() {
		if err := s.Synchronize(); err != nil {
			return r.handBack(p, b, fmt.Errorf("devalloc: passthrough free %v: wait for stream %d: %w", p, s.ID(), err))
		}
	}
	if err := r.dev.Free(p); err != nil {
		return r.handBack(p, b, fmt.Errorf("devalloc: passthrough free %v: %w", p, err))
	}
	r.mu.Lock()
	r.st.apply(passDelta(b.size, -1))
	r.mu.Unlock()
	return nil
}

// handBack makes b live again after a Free that freed nothing.
func (r *Passthrough) handBack(p driver.Ptr, b *passBlock, err error) error {
	r.mu.Lock()
	r.live[p] = b
	r.mu.Unlock()
	return fmt.Errorf("%w; the memory is still live and the caller's", err)
}

// HoldsStream reports false: a passthrough resource keeps nothing for any
// stream beyond the live allocations made on it.
func (r *Passthrough) HoldsStream(driver.Stream) bool { return false }

// Poll has nothing to do: Free waits on the host. It returns 0.
func (r *Passthrough) Poll() int { return 0 }

// Drain has nothing to do: Free waits on the host. It returns nil.
func (r *Passthrough) Drain() error { return nil }

// EmptyCache has nothing to release. It returns nil.
func (r *Passthrough) EmptyCache() error { return nil }

// Stats returns a consistent copy of the statistics.
func (r *Passthrough) Stats() Stats {
	r.mu.Lock()
	s := r.st.stats()
	r.mu.Unlock()
	s.Backend = BackendPassthrough.String()
	return s
}

// Close refuses later Allocs with ErrClosed. Live memory stays valid and
// Free still returns it to the device. Close is idempotent and safe to
// call concurrently with other methods.
func (r *Passthrough) Close() error {
	r.closed.Store(true)
	return nil
}
