package hostpin

import "math/bits"

// Size classes.
//
// A request is rounded up to a class: from minClassSize up, each power of
// two [2^k, 2^(k+1)) is split into perDoubling equal steps of 2^k/perDoubling
// bytes. With four steps the classes run 4, 5, 6, 7, 8, 10, 12, 14, 16, 20 KiB
// and so on, and the worst case (a request one byte above a power of two)
// is handed 1.25x what it asked for; the mean over sizes spread evenly on a
// log scale is about 1.09x. Rounding to the next power of two, as PyTorch's
// and CuPy's pinned allocators do, loses up to 2x host RAM. More steps per
// doubling waste less but split the cache into more lists that each hit less
// often; four keeps the 1.25x bound that a reused larger buffer also obeys.

const (
	// minClassShift is log2 of the smallest class. 4 KiB is the page size
	// of most hosts and the smallest unit a driver pins, so smaller requests
	// share the 4 KiB class (carved from a slab, so they cost no page of
	// their own beyond it).
	minClassShift = 12
	minClassSize  = 1 << minClassShift

	// defaultPerDoubling is the number of classes per power of two: the
	// handed-out size stays within 1.25x of the request.
	defaultPerDoubling = 4
	// maxPerDoubling bounds the option: 16 steps keep every class of the
	// first doubling a multiple of 256 bytes.
	maxPerDoubling = 16

	// reuseNum/reuseDen is the largest ratio of handed-out to requested size:
	// a cached buffer up to 1.25x larger than a request serves it, so large
	// buffers get reused instead of sitting idle next to a fresh allocation.
	reuseNum, reuseDen = 5, 4
)

// classSize is the class a request of n bytes (n > 0) rounds up to.
func classSize(n, perDoubling int) int {
	if n <= minClassSize {
		return minClassSize
	}
	k := bits.Len(uint(n-1)) - 1 // 2^k < n <= 2^(k+1)
	step := (1 << k) / perDoubling
	return (n + step - 1) &^ (step - 1)
}

// bucketIndex is the index of the largest class not above size
// (size >= minClassSize). For a class size it is that class's own index,
// so classes are numbered 0, 1, 2, ... from minClassSize up.
func bucketIndex(size, perDoubling int) int {
	k := bits.Len(uint(size)) - 1
	step := (1 << k) / perDoubling
	return (k-minClassShift)*perDoubling + (size-1<<k)/step
}

// roundUp rounds n up to a multiple of align, a power of two.
func roundUp(n, align int) int { return (n + align - 1) &^ (align - 1) }

// reuseLimit is the largest buffer that may serve a request of n bytes
// whose own rounded size is want.
func reuseLimit(n, want int) int {
	return max(want, n/reuseDen*reuseNum+n%reuseDen*reuseNum/reuseDen)
}
