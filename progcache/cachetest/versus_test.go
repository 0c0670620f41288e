package cachetest

import (
	"flag"
	"testing"
	"time"
)

// spin busy-waits d: a side whose cost does not depend on the caches or
// the other side.
func spin(d time.Duration) func() {
	return func() {
		for t0 := time.Now(); time.Since(t0) < d; {
		}
	}
}

// TestVersusRatioDirection: Versus's ratio is how many times better ours
// is than the baseline (base/ours), named better-than-<base>-x, the one
// direction of every ratio accelkit prints; it once printed ours/base
// under the name "ours/base".
func TestVersusRatioDirection(t *testing.T) {
	bt := flag.Lookup("test.benchtime")
	old := bt.Value.String()
	if err := bt.Value.Set("21x"); err != nil {
		t.Fatal(err)
	}
	defer bt.Value.Set(old)
	for _, tc := range []struct {
		name       string
		ours, base time.Duration
		lo, hi     float64 // the median must lie in [lo, hi]
	}{
		{"ours 4x slower", 200 * time.Microsecond, 50 * time.Microsecond, 0, 0.5},
		{"ours 4x faster", 50 * time.Microsecond, 200 * time.Microsecond, 2, 1e9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testing.Benchmark(func(b *testing.B) {
				Versus(b, 1, Side{Name: "ours", Run: spin(tc.ours)}, Side{Name: "raw", Run: spin(tc.base)})
			})
			m := r.Extra
			for _, name := range []string{"ours-ns/op", "raw-ns/op", "better-than-raw-x", "better-than-raw-x-p10", "better-than-raw-x-p90"} {
				if _, ok := m[name]; !ok {
					t.Errorf("no metric %q; got %v", name, m)
				}
			}
			if _, ok := m["ours/raw"]; ok {
				t.Errorf("the old ours/base metric is still reported: %v", m)
			}
			med := m["better-than-raw-x"]
			if med < tc.lo || med > tc.hi {
				t.Errorf("better-than-raw-x = %.3f, want in [%g, %g] (ours %v, raw %v)", med, tc.lo, tc.hi, tc.ours, tc.base)
			}
			if p10, p90 := m["better-than-raw-x-p10"], m["better-than-raw-x-p90"]; p10 > med || med > p90 {
				t.Errorf("p10 %.3f, median %.3f, p90 %.3f: not in order", p10, med, p90)
			}
		})
	}
}

func TestBetterThan(t *testing.T) {
	for _, tc := range []struct {
		base, ours time.Duration
		want       float64
	}{
		{200, 100, 2},
		{100, 200, 0.5},
		{100, 100, 1},
		{100, 0, 100}, // a zero time counts as 1ns
	} {
		if got := BetterThan(tc.base, tc.ours); got != tc.want {
			t.Errorf("BetterThan(%v, %v) = %v, want %v", tc.base, tc.ours, got, tc.want)
		}
	}
	if got := BetterThanMetric("raw"); got != "better-than-raw-x" {
		t.Errorf("BetterThanMetric(raw) = %q", got)
	}
}
