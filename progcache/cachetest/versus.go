package cachetest

import (
	"slices"
	"testing"
	"time"
)

// Side is one side of a Versus benchmark: Run does one operation and
// calls b.Fatal itself on failure.
type Side struct {
	Name string
	Run  func()
}

// Versus times ours and base in rounds, one b.Loop iteration each: a
// round runs batch operations of one side, then batch of the other, and
// the side that goes first alternates from round to round, so neither
// always runs on the caches the other warmed or in the other's wake.
// Use a batch that makes a round take some microseconds, so the clock's
// cost does not count; 1 for operations that take that long already.
//
// It reports, per operation, the median of each side over the rounds
// (ours.Name-ns/op, base.Name-ns/op) and the median of the rounds'
// ratios base/ours, "better-than-<base.Name>-x", with its 10th and 90th
// percentiles ("-p10", "-p90"): the spread a loaded machine gives it.
// The ratio is how many times better ours is than the baseline, the
// direction of every ratio accelkit's benchmarks and accbench print:
// above 1 ours wins, and a goal of "at most 1.1x the baseline's time" is
// better-than-<base>-x >= 1/1.1 = 0.909. Medians, because a round
// preempted on a busy machine moves a mean but not a median.
func Versus(b *testing.B, batch int, ours, base Side) {
	b.Helper()
	if batch < 1 {
		batch = 1
	}
	var to, tb []time.Duration
	run := func(s Side) time.Duration {
		t0 := time.Now()
		for range batch {
			s.Run()
		}
		return time.Since(t0)
	}
	for i := 0; b.Loop(); i++ {
		var do, db time.Duration
		if i%2 == 0 {
			do = run(ours)
			db = run(base)
		} else {
			db = run(base)
			do = run(ours)
		}
		to = append(to, do)
		tb = append(tb, db)
	}
	if len(to) == 0 {
		return
	}
	ratios := make([]float64, len(to))
	for i := range to {
		ratios[i] = BetterThan(tb[i], to[i])
	}
	slices.Sort(ratios)
	per := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / float64(batch)
	}
	name := BetterThanMetric(base.Name)
	b.ReportMetric(per(to), ours.Name+"-ns/op")
	b.ReportMetric(per(tb), base.Name+"-ns/op")
	b.ReportMetric(ratios[len(ratios)/2], name)
	b.ReportMetric(ratios[len(ratios)/10], name+"-p10")
	b.ReportMetric(ratios[len(ratios)*9/10], name+"-p90")
}

// BetterThan is how many times better ours is than base, both times of
// the same work: base/ours, above 1 when ours took less. A zero time
// counts as 1ns, so the ratio stays finite.
func BetterThan(base, ours time.Duration) float64 {
	return float64(max(base, 1)) / float64(max(ours, 1))
}

// BetterThanMetric is the benchmark metric name of a ratio against the
// baseline named base: "better-than-<base>-x".
func BetterThanMetric(base string) string { return "better-than-" + base + "-x" }
