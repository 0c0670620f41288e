package accbench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/accelkit/accelkit/wrlru"
)

// keyObj is a wrlru key object: 64 bytes, so each is its own allocation
// (Go's tiny allocator packs smaller pointer-free objects together).
type keyObj struct{ id [8]int64 }

func wrlruSuite() Suite {
	return Suite{
		Name: "wrlru", Title: "weak-keyed LRU hits vs golang-lru/v2",
		Run: func(env *Env) (Output, error) {
			var out Output
			const nkeys = 1024
			objs := make([]*keyObj, nkeys)
			for i := range objs {
				objs[i] = &keyObj{id: [8]int64{int64(i)}}
			}
			c, err := wrlru.New(func(ctx context.Context, o *keyObj, a int) (int, error) { return int(o.id[0]) + a, nil }, wrlru.Options{})
			if err != nil {
				return out, err
			}
			base, err := lru.New[int, int](2048)
			if err != nil {
				return out, err
			}
			ctx := context.Background()
			for i, o := range objs {
				if _, err := c.Get(ctx, o, 1); err != nil {
					return out, err
				}
				base.Add(i, i+1)
			}
			n := 2_000_000
			if env.Quick {
				n = 200_000
			}
			env.Step("hit latency, 1 goroutine")
			t0 := time.Now()
			for i := range n {
				if _, err := c.Get(ctx, objs[i&(nkeys-1)], 1); err != nil {
					return out, err
				}
			}
			ours := float64(time.Since(t0).Nanoseconds()) / float64(n)
			t0 = time.Now()
			for i := range n {
				base.Get(i & (nkeys - 1))
			}
			theirs := float64(time.Since(t0).Nanoseconds()) / float64(n)
			out.Measurements = append(out.Measurements, Measurement{
				Case: "hit latency, 1 goroutine", Unit: "ns/op", Ours: ours, Base: theirs, BaseName: "golang-lru/v2",
				Goal: goalWrlruLatency,
			})
			env.Step("hit throughput, 8 goroutines")
			run := func(get func(i int) error) (float64, error) {
				var wg sync.WaitGroup
				per := n / 8
				errs := make([]error, 8) // one slot per goroutine: no shared write in the loop
				t0 := time.Now()
				for g := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range per {
							if err := get((i*7 + g*131) & (nkeys - 1)); err != nil {
								errs[g] = err
								return
							}
						}
					}()
				}
				wg.Wait()
				return float64(per*8) / time.Since(t0).Seconds() / 1e6, errors.Join(errs...)
			}
			oursT, err := run(func(i int) error { _, err := c.Get(ctx, objs[i], 1); return err })
			if err != nil {
				return out, err
			}
			// The same closure shape as ours, so both pay one indirect call.
			theirsT, err := run(func(i int) error { base.Get(i); return nil })
			if err != nil {
				return out, err
			}
			out.Measurements = append(out.Measurements, Measurement{
				Case: "hit throughput, 8 goroutines", Unit: "Mops/s", HigherBetter: true,
				Ours: oursT, Base: theirsT, BaseName: "golang-lru/v2",
				Goal: goalWrlruThroughput,
			})
			runtime.KeepAlive(objs)
			out.Notes = append(out.Notes, fmt.Sprintf("hit throughput: 8 goroutines on GOMAXPROCS %d.", runtime.GOMAXPROCS(0)),
				"For comparison (Python, H100 machine, ANCHORS.md): JAX weakref_lru_cache hit ~1.9 us, functools.lru_cache hit ~170 ns.")
			return out, nil
		},
	}
}
