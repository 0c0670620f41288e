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
// ratios ours/base ("ours.Name/base.Name") with its 10th and 90th
// percentiles ("-p10", "-p90"): the spread a loaded machine gives it.
// Medians, because a round preempted on a busy machine moves a mean but
// not a median.
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
		ratios[i] = float64(to[i]) / float64(max(tb[i], 1))
	}
	slices.Sort(ratios)
	per := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / float64(batch)
	}
	name := ours.Name + "/" + base.Name
	b.ReportMetric(per(to), ours.Name+"-ns/op")
	b.ReportMetric(per(tb), base.Name+"-ns/op")
	b.ReportMetric(ratios[len(ratios)/2], name)
	b.ReportMetric(ratios[len(ratios)/10], name+"-p10")
	b.ReportMetric(ratios[len(ratios)*9/10], name+"-p90")
}
