package accbench

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/driver"
)

// The hit-path pool state, shared with bench/peers/torch_alloc.py so both
// allocators are measured in the same state: poolBlocks blocks of sizes
// log-uniform in [hitMin, hitMax] allocated round-robin on hitStreams
// streams and freed (so cached), then alloc+free pairs of sizes from the
// same generator continuing, on the streams in turn.
const (
	poolBlocks = 10240
	hitStreams = 8
	hitMin     = 512
	hitMax     = 2 << 20
	hitSeed    = 1
)

// xorshift64star is the generator torch_alloc.py uses too, so both draw the
// same sizes.
type xorshift64star uint64

func (s *xorshift64star) next() uint64 {
	x := uint64(*s)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*s = xorshift64star(x)
	return x * 2685821657736338717
}

func (s *xorshift64star) logSize(lo, hi float64) uint64 {
	u := float64(s.next()>>11) / 9007199254740992.0
	return uint64(lo * math.Pow(hi/lo, u))
}

// hitPath builds the pool state and returns ns per alloc+free pair.
func hitPath(env *Env, a *devalloc.Allocator, iters int) (nsPerPair float64, err error) {
	streams, err := newStreams(env, hitStreams)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, destroyStreams(streams)) }()
	rng := xorshift64star(hitSeed)
	ptrs := make([]driver.Ptr, 0, poolBlocks)
	for i := range poolBlocks {
		p, err := a.Alloc(rng.logSize(hitMin, hitMax), streams[i%hitStreams])
		if err != nil {
			return 0, fmt.Errorf("building the %d-block pool: %w", poolBlocks, err)
		}
		ptrs = append(ptrs, p)
	}
	for _, p := range ptrs {
		if err := a.Free(p); err != nil {
			return 0, err
		}
	}
	sizes := make([]uint64, 4096)
	for i := range sizes {
		sizes[i] = rng.logSize(hitMin, hitMax)
	}
	pair := func(i int) error {
		p, err := a.Alloc(sizes[i&4095], streams[i%hitStreams])
		if err != nil {
			return err
		}
		return a.Free(p)
	}
	for i := range 4096 { // warm: every size once
		if err := pair(i); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	for i := range iters {
		if err := pair(i); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(iters), nil
}

// warmPair returns ns per alloc+free pair of one size on the default stream.
func warmPair(env *Env, a *devalloc.Allocator, size uint64, iters int) (float64, error) {
	s := env.Dev.DefaultStream()
	for range 1000 {
		p, err := a.Alloc(size, s)
		if err != nil {
			return 0, err
		}
		if err := a.Free(p); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	for range iters {
		p, err := a.Alloc(size, s)
		if err != nil {
			return 0, err
		}
		if err := a.Free(p); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(iters), nil
}
