package evpool_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelkit/accelkit/driver"
	_ "github.com/accelkit/accelkit/driver/cuda" // so a go test -c binary measures CUDA when ACCELKIT_DRIVER=cuda
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
	"github.com/accelkit/accelkit/evpool"
)

// poolBatch is how many events one timed batch creates or gets, so that the
// two clock reads per batch cost little beside the operations measured.
const poolBatch = 64

// BenchmarkPool measures a pooled Get+Put against a fresh NewEvent+Destroy
// in the same run, in batches that alternate between the two, and reports
// both per event and how many times better the pool is
// (better-than-fresh-x: fresh time / pooled time; below 1 the pool does not
// pay). "record" adds what a user of the event does
// (Record on an idle stream, Synchronize), which both sides pay.
func BenchmarkPool(b *testing.B) {
	for _, record := range []bool{false, true} {
		name := "alloc"
		if record {
			name = "record"
		}
		b.Run(name, func(b *testing.B) {
			dev, _ := drivertest.OpenDevice(b, "auto", "")
			s, err := dev.NewStream()
			if err != nil {
				b.Fatal(err)
			}
			defer s.Destroy()
			pool := evpool.NewPool(dev, evpool.PoolOptions{MaxIdle: poolBatch})
			defer pool.Close()
			use := func(e driver.Event) {
				if !record {
					return
				}
				if err := e.Record(s); err != nil {
					b.Fatal(err)
				}
				if err := e.Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
			var evs [poolBatch]driver.Event
			var fresh, pooled time.Duration
			for b.Loop() {
				t0 := time.Now()
				for i := range evs {
					e, err := dev.NewEvent()
					if err != nil {
						b.Fatal(err)
					}
					use(e)
					evs[i] = e
				}
				for _, e := range evs {
					if err := e.Destroy(); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				for i := range evs {
					e, err := pool.Get()
					if err != nil {
						b.Fatal(err)
					}
					use(e)
					evs[i] = e
				}
				for _, e := range evs {
					pool.Put(e)
				}
				pooled += time.Since(t1)
				fresh += t1.Sub(t0)
			}
			n := float64(b.N * poolBatch)
			b.ReportMetric(float64(fresh.Nanoseconds())/n, "fresh-ns/event")
			b.ReportMetric(float64(pooled.Nanoseconds())/n, "pooled-ns/event")
			b.ReportMetric(float64(fresh)/float64(pooled), "better-than-fresh-x")
		})
	}
}

// BenchmarkDeferPoll is the steady state of a user of Deferred: each op
// defers one callback on one of K streams (round robin) and polls. The
// streams have no other work, so callbacks run a Poll or two after their
// Defer and the pending set stays small.
func BenchmarkDeferPoll(b *testing.B) {
	for _, k := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("streams=%d", k), func(b *testing.B) {
			dev, _ := drivertest.OpenDevice(b, "auto", "")
			ss := make([]driver.Stream, k)
			for i := range ss {
				s, err := dev.NewStream()
				if err != nil {
					b.Fatal(err)
				}
				defer s.Destroy()
				ss[i] = s
			}
			pool := evpool.NewPool(dev, evpool.PoolOptions{})
			defer pool.Close()
			d := evpool.NewDeferred(pool)
			one := make([]driver.Stream, 1)
			ran := 0
			fn := func(error) { ran++ }
			i := 0
			for b.Loop() {
				one[0] = ss[i%k]
				i++
				if err := d.Defer(one, fn); err != nil {
					b.Fatal(err)
				}
				d.Poll()
			}
			b.StopTimer()
			if err := d.Drain(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(pool.Stats().Created), "events-created")
		})
	}
}

// BenchmarkPollPending shows that a Poll's cost follows the streams with
// pending work, not the pending entries: two Deferreds over K gated streams
// each, one holding 16 entries in all and one 4096, are polled in
// alternating timed batches (so load on the machine falls on both alike).
// It reports ns and event queries per Poll for each and the time ratio
// (4096/16; 1 means the entries cost nothing). It needs sim's Gate, so it
// skips on other backends.
func BenchmarkPollPending(b *testing.B) {
	const few, many = 16, 4096
	for _, k := range []int{1, 16} {
		b.Run(fmt.Sprintf("streams=%d", k), func(b *testing.B) {
			dev, _ := drivertest.OpenDevice(b, "auto", "")
			h := sim.Hooks(dev)
			if h == nil {
				b.Skip("needs sim's Gate")
			}
			build := func(n int) *evpool.Deferred {
				pool := evpool.NewPool(dev, evpool.PoolOptions{MaxIdle: n})
				d := evpool.NewDeferred(pool)
				var opens []func()
				var streams []driver.Stream
				for range k {
					s, err := dev.NewStream()
					if err != nil {
						b.Fatal(err)
					}
					streams = append(streams, s)
					open, err := h.Gate(s)
					if err != nil {
						b.Fatal(err)
					}
					opens = append(opens, open)
					for range n / k {
						if err := d.Defer([]driver.Stream{s}, func(error) {}); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.Cleanup(func() {
					for _, open := range opens {
						open()
					}
					if err := d.Drain(); err != nil {
						b.Error(err)
					}
					for _, s := range streams {
						s.Destroy()
					}
					pool.Close()
				})
				return d
			}
			small, large := build(few), build(many)
			var tSmall, tLarge time.Duration
			var qSmall, qLarge uint64
			poll := func(d *evpool.Deferred) (time.Duration, uint64) {
				q0 := h.Stats().EventQueries
				t0 := time.Now()
				for range poolBatch {
					if d.Poll() != 0 {
						b.Fatal("Poll ran a callback of a gated stream")
					}
				}
				return time.Since(t0), h.Stats().EventQueries - q0
			}
			for b.Loop() {
				dt, dq := poll(small)
				tSmall, qSmall = tSmall+dt, qSmall+dq
				dt, dq = poll(large)
				tLarge, qLarge = tLarge+dt, qLarge+dq
			}
			polls := float64(b.N * poolBatch)
			b.ReportMetric(float64(tSmall.Nanoseconds())/polls, "ns/poll-16")
			b.ReportMetric(float64(tLarge.Nanoseconds())/polls, "ns/poll-4096")
			b.ReportMetric(float64(qSmall)/polls, "queries/poll-16")
			b.ReportMetric(float64(qLarge)/polls, "queries/poll-4096")
			b.ReportMetric(float64(tLarge)/float64(tSmall), "4096/16")
		})
	}
}

// BenchmarkHandlesHit is the hit path of Handles from every P at once, on
// a few streams: no exclusive lock, so it scales with the Ps.
func BenchmarkHandlesHit(b *testing.B) {
	dev, _ := drivertest.OpenDevice(b, "auto", "")
	ss := []driver.Stream{dev.DefaultStream()}
	for range 3 {
		s, err := dev.NewStream()
		if err != nil {
			b.Fatal(err)
		}
		defer s.Destroy()
		ss = append(ss, s)
	}
	hs := evpool.NewHandles(func(s driver.Stream) (uint64, error) { return s.ID(), nil }, nil)
	defer hs.Close()
	for _, s := range ss {
		if _, err := hs.Get(s); err != nil {
			b.Fatal(err)
		}
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := hs.Get(ss[i%len(ss)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// idleStack is the lock-free alternative to the Pool's mutex and slice that
// BenchmarkIdleSet measures: a Treiber stack, which needs a node per push
// (reusing nodes would bring the ABA problem back).
type idleStack struct{ head atomic.Pointer[idleNode] }

type idleNode struct {
	e    driver.Event
	next *idleNode
}

func (st *idleStack) push(e driver.Event) {
	n := &idleNode{e: e}
	for {
		h := st.head.Load()
		n.next = h
		if st.head.CompareAndSwap(h, n) {
			return
		}
	}
}

func (st *idleStack) pop() driver.Event {
	for {
		h := st.head.Load()
		if h == nil {
			return nil
		}
		if st.head.CompareAndSwap(h, h.next) {
			return h.e
		}
	}
}

// BenchmarkIdleSet compares the Pool's hit path (Get+Put) with a lock-free
// stack's pop+push, the reason the Pool keeps a mutex. As in BenchmarkPool,
// both run in the same loop in alternating timed batches, so load on the
// machine falls on both alike; "serial" runs on one goroutine, "parallel"
// on every P at once (each goroutine alternates and times its own batches).
// better-than-treiber-x, the stack's time over the Pool's, above 1 means
// the mutex is faster.
func BenchmarkIdleSet(b *testing.B) {
	dev, _ := drivertest.OpenDevice(b, "auto", "")
	const warm = 8
	setup := func(b *testing.B) (*evpool.Pool, *idleStack) {
		pool := evpool.NewPool(dev, evpool.PoolOptions{})
		b.Cleanup(func() { pool.Close() })
		st := &idleStack{}
		var evs []driver.Event
		for range warm {
			e, err := pool.Get()
			if err != nil {
				b.Fatal(err)
			}
			evs = append(evs, e)
			se, err := dev.NewEvent()
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { se.Destroy() })
			st.push(se)
		}
		for _, e := range evs {
			pool.Put(e)
		}
		return pool, st
	}
	// batch runs poolBatch ops of each kind and returns their times.
	batch := func(b *testing.B, pool *evpool.Pool, st *idleStack) (p, t time.Duration) {
		t0 := time.Now()
		for range poolBatch {
			e, err := pool.Get()
			if err != nil {
				b.Error(err)
				return
			}
			pool.Put(e)
		}
		t1 := time.Now()
		for range poolBatch {
			if e := st.pop(); e != nil {
				st.push(e)
			}
		}
		return t1.Sub(t0), time.Since(t1)
	}
	report := func(b *testing.B, ops int, p, t time.Duration) {
		b.ReportMetric(float64(p.Nanoseconds())/float64(ops), "pool-ns/op")
		b.ReportMetric(float64(t.Nanoseconds())/float64(ops), "treiber-ns/op")
		b.ReportMetric(float64(t)/float64(p), "better-than-treiber-x")
	}
	b.Run("serial", func(b *testing.B) {
		pool, st := setup(b)
		var p, t time.Duration
		for b.Loop() {
			dp, dt := batch(b, pool, st)
			p, t = p+dp, t+dt
		}
		report(b, b.N*poolBatch, p, t)
	})
	b.Run("parallel", func(b *testing.B) {
		pool, st := setup(b)
		var mu sync.Mutex
		var p, t time.Duration
		var ops int
		b.RunParallel(func(pb *testing.PB) {
			var lp, lt time.Duration
			n := 0
			for pb.Next() {
				dp, dt := batch(b, pool, st)
				lp, lt, n = lp+dp, lt+dt, n+poolBatch
			}
			mu.Lock()
			p, t, ops = p+lp, t+lt, ops+n
			mu.Unlock()
		})
		report(b, ops, p, t)
	})
}
