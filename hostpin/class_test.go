package hostpin

import (
	"math"
	"testing"
)

func TestClassSize(t *testing.T) {
	tests := []struct {
		n, perDbl, want int
	}{
		{1, 4, 4 << 10},
		{4 << 10, 4, 4 << 10},
		{4<<10 + 1, 4, 5 << 10},
		{5 << 10, 4, 5 << 10},
		{7<<10 + 1, 4, 8 << 10},
		{8<<10 + 1, 4, 10 << 10},
		{60 << 10, 4, 64 << 10},
		{64<<10 + 1, 4, 80 << 10},
		{1<<20 + 1, 4, 1<<20 + 256<<10},
		{1<<20 + 1, 1, 2 << 20},
		{1<<20 + 1, 2, 1<<20 + 512<<10},
		{1<<20 + 1, 16, 1<<20 + 64<<10},
		{3 << 30, 4, 3 << 30},
	}
	for _, tt := range tests {
		if got := classSize(tt.n, tt.perDbl); got != tt.want {
			t.Errorf("classSize(%d, %d) = %d, want %d", tt.n, tt.perDbl, got, tt.want)
		}
	}
}

// TestClassBuckets checks that classes are numbered 0, 1, 2, ... and that
// every size falls in the bucket of the largest class not above it.
func TestClassBuckets(t *testing.T) {
	for _, d := range []int{1, 2, 4, 8, 16} {
		prev := 0
		for i := 0; i < 30*d; i++ {
			c := classSize(prev+1, d)
			if prev == 0 {
				c = minClassSize
			}
			if got := bucketIndex(c, d); got != i {
				t.Fatalf("perDoubling %d: class %d has bucket %d, want %d", d, c, got, i)
			}
			if prev > 0 {
				if got := bucketIndex(c-1, d); got != i-1 {
					t.Fatalf("perDoubling %d: size %d has bucket %d, want %d", d, c-1, got, i-1)
				}
			}
			prev = c
		}
	}
}

// roundingWaste sweeps n sizes spread evenly on a log scale over
// [lo, hi] and returns the mean and max of rounded size / requested size.
func roundingWaste(a *Allocator, lo, hi float64, n int) (mean, worst float64) {
	var sum float64
	for i := 0; i < n; i++ {
		size := int(math.Exp(math.Log(lo) + (math.Log(hi)-math.Log(lo))*float64(i)/float64(n-1)))
		r := float64(a.RoundedSize(size)) / float64(size)
		sum += r
		worst = max(worst, r)
	}
	return sum / float64(n), worst
}

func TestRoundingWasteBound(t *testing.T) {
	a := &Allocator{perDbl: defaultPerDoubling, pageSize: 4096, opts: Options{PageOnlyThreshold: defaultPageOnlyThreshold}}
	mean, worst := roundingWaste(a, 4<<10, 256<<20, 100_000)
	t.Logf("rounding over 4 KiB..256 MiB: mean %.4f, max %.4f", mean, worst)
	if mean > 1.10 || worst > 1.25 {
		t.Errorf("rounding waste mean %.4f (want <= 1.10), max %.4f (want <= 1.25)", mean, worst)
	}
	// Every size one byte above a class edge, the worst case of each class.
	for n := minClassSize; n < 256<<20; n = classSize(n+1, defaultPerDoubling) {
		if r := float64(a.RoundedSize(n+1)) / float64(n+1); r > 1.25 {
			t.Fatalf("RoundedSize(%d) = %d: ratio %.4f above 1.25", n+1, a.RoundedSize(n+1), r)
		}
	}
}

func TestReuseLimit(t *testing.T) {
	tests := []struct{ n, want, limit int }{
		{100, 4096, 4096},
		{4096, 4096, 5120},
		{4097, 5120, 5121},
		{80 << 10, 80 << 10, 100 << 10},
		{1<<40 - 1, 1 << 40, 1<<40 + 1<<38 - 2},
	}
	for _, tt := range tests {
		if got := reuseLimit(tt.n, tt.want); got != tt.limit {
			t.Errorf("reuseLimit(%d, %d) = %d, want %d", tt.n, tt.want, got, tt.limit)
		}
	}
}
