package accbench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/accelkit/accelkit/bench/report"
	"github.com/accelkit/accelkit/wrlru"
)

// keyObj is a wrlru key object: 64 bytes, so each is its own allocation
// (Go's tiny allocator packs smaller pointer-free objects together).
type keyObj struct{ id [8]int64 }

// lruKey is golang-lru's key: the same object pointer and argument that
// wrlru is asked for, so both caches hash and compare the same key.
type lruKey struct {
	obj *keyObj
	arg int
}

// alternateRounds measures ours and base in rounds, each side once a round, the
// side that goes first swapping every round (ours first in even rounds):
// load that comes and goes on a shared machine falls on both alike, and
// neither always runs on the caches and the clock speed the other left
// behind. It returns each side's figure per round.
func alternateRounds(rounds int, ours, base func() (float64, error)) (o, b []float64, err error) {
	for r := range rounds {
		first, second := ours, base
		if r%2 == 1 {
			first, second = base, ours
		}
		x, err := first()
		if err != nil {
			return nil, nil, err
		}
		y, err := second()
		if err != nil {
			return nil, nil, err
		}
		if r%2 == 1 {
			x, y = y, x
		}
		o, b = append(o, x), append(b, y)
	}
	return o, b, nil
}

// roundsNote says how a side's rounds spread: median, min and max.
func roundsNote(what, unit string, ours, base []float64) string {
	so, sb := report.NewStat(ours...), report.NewStat(base...)
	return fmt.Sprintf("%s, %d alternating rounds: wrlru median %s (%s..%s, spread %.0f%%), golang-lru/v2 median %s (%s..%s, spread %.0f%%) %s",
		what, len(ours), report.FormatNumber(so.Median), report.FormatNumber(so.Min), report.FormatNumber(so.Max), 100*so.Spread(),
		report.FormatNumber(sb.Median), report.FormatNumber(sb.Min), report.FormatNumber(sb.Max), 100*sb.Spread(), unit)
}

func wrlruSuite() Suite {
	return Suite{
		Name: "wrlru", Title: "weak-keyed LRU hits vs golang-lru/v2",
		Run: func(env *Env) (Output, error) {
			var out Output
			const nkeys = 1024
			objs := make([]*keyObj, nkeys)
			keys := make([]lruKey, nkeys)
			for i := range objs {
				objs[i] = &keyObj{id: [8]int64{int64(i)}}
				keys[i] = lruKey{objs[i], 1}
			}
			c, err := wrlru.New(func(ctx context.Context, o *keyObj, a int) (int, error) { return int(o.id[0]) + a, nil }, wrlru.Options{})
			if err != nil {
				return out, err
			}
			base, err := lru.New[lruKey, int](2048)
			if err != nil {
				return out, err
			}
			ctx := context.Background()
			for _, k := range keys {
				if _, err := c.Get(ctx, k.obj, k.arg); err != nil {
					return out, err
				}
				base.Add(k, int(k.obj.id[0])+k.arg)
			}
			// n hits a side, in rounds.
			n, rounds := 2_000_000, 21
			if env.Quick {
				n, rounds = 200_000, 7
			}
			per := n / rounds
			env.Step("hit latency, 1 goroutine")
			latency := func(get func(k lruKey) error) func() (float64, error) {
				return func() (float64, error) {
					t0 := time.Now()
					for i := range per {
						if err := get(keys[i&(nkeys-1)]); err != nil {
							return 0, err
						}
					}
					return float64(time.Since(t0).Nanoseconds()) / float64(per), nil
				}
			}
			// Both sides through the same closure shape: one indirect call each.
			getOurs := func(k lruKey) error { _, err := c.Get(ctx, k.obj, k.arg); return err }
			getBase := func(k lruKey) error { base.Get(k); return nil }
			ours, theirs, err := alternateRounds(rounds, latency(getOurs), latency(getBase))
			if err != nil {
				return out, err
			}
			out.Measurements = append(out.Measurements, Measurement{
				Case: "hit latency, 1 goroutine", Unit: "ns/op",
				Ours: report.NewStat(ours...).Median, Base: report.NewStat(theirs...).Median, BaseName: "golang-lru/v2",
				Goal: goalWrlruLatency,
			})
			out.Notes = append(out.Notes, roundsNote("hit latency", "ns/op", ours, theirs))

			env.Step("hit throughput, 8 goroutines")
			throughput := func(get func(k lruKey) error) func() (float64, error) {
				return func() (float64, error) {
					var wg sync.WaitGroup
					per := per / 8
					errs := make([]error, 8) // one slot per goroutine: no shared write in the loop
					t0 := time.Now()
					for g := range 8 {
						wg.Go(func() {
							for i := range per {
								if err := get(keys[(i*7+g*131)&(nkeys-1)]); err != nil {
									errs[g] = err
									return
								}
							}
						})
					}
					wg.Wait()
					return float64(per*8) / time.Since(t0).Seconds() / 1e6, errors.Join(errs...)
				}
			}
			ours, theirs, err = alternateRounds(rounds, throughput(getOurs), throughput(getBase))
			if err != nil {
				return out, err
			}
			out.Measurements = append(out.Measurements, Measurement{
				Case: "hit throughput, 8 goroutines", Unit: "Mops/s", HigherBetter: true,
				Ours: report.NewStat(ours...).Median, Base: report.NewStat(theirs...).Median, BaseName: "golang-lru/v2",
				Goal: goalWrlruThroughput,
			})
			runtime.KeepAlive(objs)
			out.Notes = append(out.Notes, roundsNote("hit throughput", "Mops/s", ours, theirs),
				fmt.Sprintf("hit throughput: 8 goroutines on GOMAXPROCS %d.", runtime.GOMAXPROCS(0)),
				"Both caches are keyed by the same object pointer and argument (golang-lru/v2 by a struct of the two) and hit through the same closure shape; "+
					"each row is the median of its rounds, the sides alternating which goes first.",
				"For comparison (Python, H100 machine, ANCHORS.md): JAX weakref_lru_cache hit ~1.9 us, functools.lru_cache hit ~170 ns.")
			return out, nil
		},
	}
}
