package evpool_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
	"github.com/accelkit/accelkit/evpool"
)

// recorder collects callback results.
type recorder struct {
	mu   sync.Mutex
	runs map[string][]error
}

func newRecorder() *recorder { return &recorder{runs: map[string][]error{}} }

func (r *recorder) fn(name string) func(error) {
	return func(err error) {
		r.mu.Lock()
		r.runs[name] = append(r.runs[name], err)
		r.mu.Unlock()
	}
}

// ran reports how many times name ran and its last error.
func (r *recorder) ran(name string) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := r.runs[name]
	if len(errs) == 0 {
		return 0, nil
	}
	return len(errs), errs[len(errs)-1]
}

func newDeferred(t *testing.T, dev driver.Device) (*evpool.Pool, *evpool.Deferred) {
	t.Helper()
	p := evpool.NewPool(dev, evpool.PoolOptions{})
	t.Cleanup(func() { p.Close() })
	return p, evpool.NewDeferred(p)
}

func mustDefer(t *testing.T, d *evpool.Deferred, ss []driver.Stream, fn func(error)) {
	t.Helper()
	if err := d.Defer(ss, fn); err != nil {
		t.Fatal(err)
	}
}

// finish makes the queued work of ss complete and then runs what is ready,
// by Poll (after synchronizing the streams) or by Drain.
func finish(t *testing.T, d *evpool.Deferred, byDrain bool, ss ...driver.Stream) {
	t.Helper()
	if byDrain {
		d.Drain() // stream errors are checked through the callbacks
		return
	}
	syncAll(ss...)
	d.Poll()
}

func TestDeferredWaitsForGatedWork(t *testing.T) {
	for _, byDrain := range []bool{false, true} {
		t.Run(fmt.Sprintf("drain=%v", byDrain), func(t *testing.T) {
			dev, h := drivertest.OpenDevice(t, "sim", simDSN)
			_, d := newDeferred(t, dev)
			s := newStreams(t, dev, 1)[0]
			rec := newRecorder()
			open := gate(t, h, s)
			mustDefer(t, d, []driver.Stream{s}, rec.fn("a"))
			if n := d.Poll(); n != 0 {
				t.Fatalf("Poll ran %d callbacks while the stream is gated", n)
			}
			if n, _ := rec.ran("a"); n != 0 {
				t.Fatalf("callback ran before its stream's work finished")
			}
			if got := d.Pending(); got != 1 {
				t.Fatalf("Pending() = %d, want 1", got)
			}
			open()
			finish(t, d, byDrain, s)
			if n, err := rec.ran("a"); n != 1 || err != nil {
				t.Fatalf("after the work finished: ran %d times, err %v; want once, nil", n, err)
			}
			if got := d.Pending(); got != 0 {
				t.Fatalf("Pending() = %d after it ran, want 0", got)
			}
		})
	}
}

func TestDeferredRunsAfterLastStream(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	ss := newStreams(t, dev, 3)
	rec := newRecorder()
	opens := []func(){gate(t, h, ss[0]), gate(t, h, ss[1]), gate(t, h, ss[2])}
	mustDefer(t, d, ss, rec.fn("all"))
	mustDefer(t, d, ss[1:2], rec.fn("only1"))
	for i, open := range opens {
		open()
		syncAll(ss[i])
		d.Poll()
		n, _ := rec.ran("all")
		if last := i == len(opens)-1; (n == 1) != last {
			t.Fatalf("after opening %d of 3 streams the 3-stream callback ran %d times", i+1, n)
		}
		if n, _ := rec.ran("only1"); (n == 1) != (i >= 1) {
			t.Fatalf("after opening %d of 3 streams the stream-1 callback ran %d times", i+1, n)
		}
	}
}

func TestDeferredStickyError(t *testing.T) {
	for _, byDrain := range []bool{false, true} {
		t.Run(fmt.Sprintf("drain=%v", byDrain), func(t *testing.T) {
			dev, h := drivertest.OpenDevice(t, "sim", simDSN)
			_, d := newDeferred(t, dev)
			ss := newStreams(t, dev, 2)
			bad, good := ss[0], ss[1]
			buf, err := dev.Malloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Free(buf)
			rec := newRecorder()
			openGood := gate(t, h, good)
			mustDefer(t, d, []driver.Stream{bad}, rec.fn("before")) // recorded before the failure
			h.FailStream(bad)
			if err := dev.Memset(buf, 1, 4096, bad); err != nil {
				t.Fatal(err)
			}
			mustDefer(t, d, []driver.Stream{bad}, rec.fn("bad"))
			mustDefer(t, d, []driver.Stream{bad, good}, rec.fn("both"))
			mustDefer(t, d, []driver.Stream{good}, rec.fn("good"))

			syncAll(bad)
			d.Poll()
			if n, err := rec.ran("before"); n != 1 || err != nil {
				t.Errorf("work before the failure: ran %d, err %v; want once, nil", n, err)
			}
			if n, err := rec.ran("bad"); n != 1 || !errors.Is(err, sim.ErrInjected) {
				t.Errorf("work after the failure: ran %d, err %v; want once with the injected error", n, err)
			}
			if n, _ := rec.ran("both"); n != 0 {
				t.Errorf("callback on a failed and a gated stream ran before the gated stream finished")
			}
			openGood()
			finish(t, d, byDrain, good)
			if n, err := rec.ran("both"); n != 1 || !errors.Is(err, driver.ErrInvalidValue) {
				t.Errorf("failed+good streams: ran %d, err %v; want once with the stream error", n, err)
			}
			if n, err := rec.ran("good"); n != 1 || err != nil {
				t.Errorf("good stream: ran %d, err %v; want once, nil", n, err)
			}
		})
	}
}

// TestDeferredDeadStream fails a stream before anything is deferred on it,
// so the stream's head event itself reports the error: every entry on the
// stream gets it, through Poll and through Drain (which also returns it).
func TestDeferredDeadStream(t *testing.T) {
	for _, byDrain := range []bool{false, true} {
		t.Run(fmt.Sprintf("drain=%v", byDrain), func(t *testing.T) {
			dev, h := drivertest.OpenDevice(t, "sim", simDSN)
			_, d := newDeferred(t, dev)
			s := newStreams(t, dev, 1)[0]
			buf, err := dev.Malloc(64)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Free(buf)
			h.FailStream(s)
			if err := dev.Memset(buf, 0, 64, s); err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			for i := range 3 {
				mustDefer(t, d, []driver.Stream{s}, rec.fn(fmt.Sprint(i)))
			}
			if byDrain {
				if err := d.Drain(); !errors.Is(err, sim.ErrInjected) {
					t.Errorf("Drain() = %v, want the stream's injected error", err)
				}
			} else {
				syncAll(s)
				if n := d.Poll(); n != 3 {
					t.Errorf("Poll ran %d, want 3", n)
				}
			}
			for i := range 3 {
				if n, err := rec.ran(fmt.Sprint(i)); n != 1 || !errors.Is(err, sim.ErrInjected) {
					t.Errorf("entry %d: ran %d, err %v; want once with the injected error", i, n, err)
				}
			}
			if err := d.Drain(); err != nil {
				t.Errorf("Drain with nothing pending = %v, want nil", err)
			}
			// The events that reported the failure went back to the pool;
			// recorded on a healthy stream they must not carry it.
			healthy := newStreams(t, dev, 1)[0]
			for i := range 3 {
				mustDefer(t, d, []driver.Stream{healthy}, rec.fn(fmt.Sprint("healthy", i)))
			}
			if err := d.Drain(); err != nil {
				t.Errorf("Drain on a healthy stream = %v, want nil", err)
			}
			for i := range 3 {
				if n, err := rec.ran(fmt.Sprint("healthy", i)); n != 1 || err != nil {
					t.Errorf("healthy entry %d (reusing an event that saw the failure): ran %d, err %v; want once, nil", i, n, err)
				}
			}
		})
	}
}

// TestDeferredPollQueriesHeads shows that Poll's cost follows the streams
// with pending work, not the pending entries: with N entries on each of K
// gated streams, a Poll asks K events (each stream's head), however large N.
func TestDeferredPollQueriesHeads(t *testing.T) {
	tests := []struct{ streams, perStream int }{
		{1, 1}, {1, 50}, {4, 1}, {4, 25}, {16, 10},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("K=%d,N=%d", tt.streams, tt.perStream), func(t *testing.T) {
			dev, h := drivertest.OpenDevice(t, "sim", simDSN)
			_, d := newDeferred(t, dev)
			ss := newStreams(t, dev, tt.streams)
			newStreams(t, dev, 8) // idle streams cost nothing
			var ran atomic.Int64
			var opens []func()
			for _, s := range ss {
				opens = append(opens, gate(t, h, s))
				for range tt.perStream {
					mustDefer(t, d, []driver.Stream{s}, func(error) { ran.Add(1) })
				}
			}
			k := uint64(tt.streams)
			for range 3 {
				q0 := h.Stats().EventQueries
				if n := d.Poll(); n != 0 {
					t.Fatalf("Poll ran %d while gated", n)
				}
				if q := h.Stats().EventQueries - q0; q != k {
					t.Fatalf("Poll with %d entries on %d gated streams made %d event queries, want %d",
						tt.streams*tt.perStream, tt.streams, q, k)
				}
			}
			for _, open := range opens {
				open()
			}
			syncAll(ss...)
			q0 := h.Stats().EventQueries
			n := d.Poll()
			q := h.Stats().EventQueries - q0
			if want := tt.streams * tt.perStream; n != want || int(ran.Load()) != want {
				t.Fatalf("Poll after the work finished ran %d (callbacks saw %d), want %d", n, ran.Load(), want)
			}
			if q > 2*k {
				t.Fatalf("Poll completing %d entries on %d streams made %d queries, want at most %d (head and tail)",
					n, tt.streams, q, 2*k)
			}
			q0 = h.Stats().EventQueries
			d.Poll()
			if q := h.Stats().EventQueries - q0; q != 0 {
				t.Fatalf("Poll with nothing pending made %d queries", q)
			}
		})
	}
}

// TestDeferredPollPartial gates a stream twice so that its first entries are
// done and the later ones are not: Poll completes exactly the done ones.
func TestDeferredPollPartial(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	s := newStreams(t, dev, 1)[0]
	rec := newRecorder()
	open1 := gate(t, h, s)
	for i := range 3 {
		mustDefer(t, d, []driver.Stream{s}, rec.fn(fmt.Sprint("early", i)))
	}
	// A witness after the early entries and before the second gate tells
	// when the stream has reached the gate.
	witness, err := dev.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer witness.Destroy()
	if err := witness.Record(s); err != nil {
		t.Fatal(err)
	}
	open2 := gate(t, h, s)
	for i := range 3 {
		mustDefer(t, d, []driver.Stream{s}, rec.fn(fmt.Sprint("late", i)))
	}
	open1()
	if err := witness.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if n := d.Poll(); n != 3 {
		t.Fatalf("Poll ran %d, want the 3 early entries", n)
	}
	for i := range 3 {
		if n, _ := rec.ran(fmt.Sprint("early", i)); n != 1 {
			t.Fatalf("early entry %d ran %d times, want 1", i, n)
		}
		if n, _ := rec.ran(fmt.Sprint("late", i)); n != 0 {
			t.Fatalf("late entry %d ran before the second gate opened", i)
		}
	}
	if got := d.Pending(); got != 3 {
		t.Fatalf("Pending() = %d, want 3", got)
	}
	open2()
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if n, _ := rec.ran(fmt.Sprint("late", i)); n != 1 {
			t.Fatalf("late entry %d ran %d times after Drain, want 1", i, n)
		}
	}
}

func TestDeferredDeferErrors(t *testing.T) {
	drv := drivertest.OpenDriver(t, "sim", "devices=2,"+simDSN)
	dev := deviceOf(t, drv, 0)
	other := deviceOf(t, drv, 1)
	s := newStreams(t, dev, 1)[0]
	foreign := newStreams(t, other, 1)[0]
	noop := func(error) {}
	tests := []struct {
		name    string
		streams []driver.Stream
		fn      func(error)
	}{
		{"nil callback", []driver.Stream{s}, nil},
		{"stream of another device", []driver.Stream{s, foreign}, noop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, d := newDeferred(t, dev)
			if err := d.Defer(tt.streams, tt.fn); !errors.Is(err, driver.ErrInvalidValue) {
				t.Errorf("Defer = %v, want driver.ErrInvalidValue", err)
			}
			if got := d.Pending(); got != 0 {
				t.Errorf("Pending() = %d after a refused Defer", got)
			}
			if st := p.Stats(); st.Created != 0 {
				t.Errorf("a refused Defer took %d events", st.Created)
			}
		})
	}
}

func TestDeferredNilIsTheDefaultStream(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	open := gate(t, h, dev.DefaultStream())
	ran := 0
	mustDefer(t, d, []driver.Stream{nil}, func(error) { ran++ })
	if d.Poll(); ran != 0 {
		t.Fatal("a Defer on the nil stream ran while the default stream was gated")
	}
	open()
	if err := d.Drain(); err != nil || ran != 1 {
		t.Fatalf("Drain = %v, ran %d times; want nil and 1", err, ran)
	}
}

func TestDeferredRecordFailure(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	p, d := newDeferred(t, dev)
	ss := newStreams(t, dev, 2)
	// Warm the pool so Get succeeds and the failure comes from Record.
	e1, _ := p.Get()
	e2, _ := p.Get()
	p.Put(e1)
	p.Put(e2)
	h.SetFaultRate(1, 1)
	ran := false
	err := d.Defer(ss, func(error) { ran = true })
	h.SetFaultRate(1, 0)
	if !errors.Is(err, sim.ErrInjected) {
		t.Fatalf("Defer with failing Record = %v, want the injected error", err)
	}
	if got := d.Pending(); got != 0 {
		t.Errorf("Pending() = %d after a failed Defer", got)
	}
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Errorf("callback of a failed Defer ran")
	}
	if st := p.Stats(); st.Idle != 2 {
		t.Errorf("events of a failed Defer not returned: %+v", st)
	}
}

func TestDeferredDuplicateStreams(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	s := newStreams(t, dev, 1)[0]
	r0 := h.Stats().EventRecords
	var n atomic.Int32
	mustDefer(t, d, []driver.Stream{s, s, dev.DefaultStream(), s, dev.DefaultStream()}, func(error) { n.Add(1) })
	if got := h.Stats().EventRecords - r0; got != 2 {
		t.Errorf("recorded %d events for 2 distinct streams", got)
	}
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 {
		t.Errorf("callback ran %d times, want 1", n.Load())
	}
}

func TestDeferredNoStreams(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	var n atomic.Int32
	mustDefer(t, d, nil, func(err error) {
		if err != nil {
			t.Errorf("err = %v, want nil", err)
		}
		n.Add(1)
	})
	if got := d.Pending(); got != 1 {
		t.Fatalf("Pending() = %d, want 1", got)
	}
	if got := d.Poll(); got != 1 || n.Load() != 1 {
		t.Fatalf("Poll ran %d (callback %d times), want 1", got, n.Load())
	}
}

func TestDeferredEventsReturnToPool(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	p, d := newDeferred(t, dev)
	ss := newStreams(t, dev, 4)
	for range 10 {
		mustDefer(t, d, ss, func(error) {})
	}
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Created != 40 || st.Idle != 40 {
		t.Fatalf("after Drain: %+v, want 40 created and all 40 idle", st)
	}
	for range 10 {
		mustDefer(t, d, ss, func(error) {})
	}
	d.Drain()
	if st := p.Stats(); st.Created != 40 || st.Reused != 40 {
		t.Fatalf("second round: %+v, want the 40 events reused, none created", st)
	}
}

func TestDeferredPanickingCallback(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	var ran [3]atomic.Int32
	for i := range 3 {
		mustDefer(t, d, nil, func(error) {
			ran[i].Add(1)
			if i == 1 {
				panic("callback failed")
			}
		})
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("Poll swallowed the callback's panic")
			}
		}()
		d.Poll()
	}()
	if got := d.Pending(); got != 1 {
		t.Fatalf("Pending() = %d after the panic, want 1 (the callback after it)", got)
	}
	if n := d.Poll(); n != 1 {
		t.Fatalf("next Poll ran %d, want 1", n)
	}
	for i := range ran {
		if got := ran[i].Load(); got != 1 {
			t.Errorf("callback %d ran %d times, want 1", i, got)
		}
	}
}

func TestDeferredReentrant(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	s := newStreams(t, dev, 1)[0]
	var child atomic.Int32
	mustDefer(t, d, []driver.Stream{s}, func(error) {
		// Re-entrant: Defer, Pending and Poll from inside a callback.
		if err := d.Defer([]driver.Stream{s}, func(error) { child.Add(1) }); err != nil {
			t.Error(err)
		}
		d.Pending()
		d.Poll()
	})
	open := gate(t, h, s)
	open()
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	if child.Load() != 1 || d.Pending() != 0 {
		t.Fatalf("child ran %d times, %d pending; Drain should run what callbacks defer", child.Load(), d.Pending())
	}
}

// TestDeferredStress has many goroutines defer on random sets of many
// streams, gate streams now and then, and poll, all at once. Each entry
// records a witness event on its streams just before its Defer: when the
// callback runs, the witnesses must be done (the callback ran after the work
// queued before Defer), and each callback must run exactly once. Some
// callbacks defer again from inside, and a goroutine drains meanwhile.
func TestDeferredStress(t *testing.T) {
	const (
		workers = 8
		streams = 12
		iters   = 120
	)
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	p, d := newDeferred(t, dev)
	ss := newStreams(t, dev, streams)
	bufs := make([]driver.Ptr, streams)
	for i := range bufs {
		b, err := dev.Malloc(256)
		if err != nil {
			t.Fatal(err)
		}
		bufs[i] = b
		defer dev.Free(b)
	}
	var (
		runs     sync.Map // entry id -> *atomic.Int32
		total    atomic.Int64
		deferred atomic.Int64
		wg       sync.WaitGroup
	)
	check := func(id int, witnesses []driver.Event) func(error) {
		c := new(atomic.Int32)
		runs.Store(id, c)
		deferred.Add(1)
		return func(err error) {
			c.Add(1)
			total.Add(1)
			if err != nil {
				t.Errorf("entry %d: unexpected stream error %v", id, err)
			}
			for _, w := range witnesses {
				if done, err := w.Query(); !done || err != nil {
					t.Errorf("entry %d ran before the work queued before Defer finished (done=%v, err=%v)", id, done, err)
				}
				p.Put(w)
			}
		}
	}
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range iters {
				id := w*iters + i
				k := 1 + rng.IntN(3)
				idx := make([]int, k)
				pick := make([]driver.Stream, k)
				for j := range pick {
					idx[j] = rng.IntN(streams)
					pick[j] = ss[idx[j]]
				}
				var open func()
				if i%8 == 0 {
					o, err := h.Gate(pick[0])
					if err != nil {
						t.Error(err)
						return
					}
					open = o
				}
				var witnesses []driver.Event
				for j, s := range pick {
					if err := dev.Memset(bufs[idx[j]], byte(i), 256, s); err != nil {
						t.Error(err)
						return
					}
					we, err := p.Get()
					if err == nil {
						err = we.Record(s)
					}
					if err != nil {
						t.Error(err)
						return
					}
					witnesses = append(witnesses, we)
				}
				fn := check(id, witnesses)
				if id%5 == 0 {
					inner := fn
					fn = func(err error) {
						inner(err)
						childID := -1 - id
						if err := d.Defer(pick, check(childID, nil)); err != nil {
							t.Error(err)
						}
					}
				}
				if err := d.Defer(pick, fn); err != nil {
					t.Error(err)
					return
				}
				d.Poll()
				if open != nil {
					open()
				}
			}
		})
	}
	// A Drain loop beside the workers: it waits on gated streams that the
	// workers open, and its callbacks interleave with theirs.
	wg.Go(func() {
		for range 5 {
			if err := d.Drain(); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	if got, want := total.Load(), deferred.Load(); got != want {
		t.Errorf("%d callbacks ran, %d were deferred", got, want)
	}
	runs.Range(func(k, v any) bool {
		if n := v.(*atomic.Int32).Load(); n != 1 {
			t.Errorf("entry %v ran %d times, want once", k, n)
		}
		return true
	})
	if got := d.Pending(); got != 0 {
		t.Errorf("Pending() = %d after Drain", got)
	}
}

func TestNilArguments(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	s := dev.DefaultStream()
	if err := evpool.NewDeferred(nil).Defer([]driver.Stream{s}, func(error) {}); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Defer on a Deferred without a pool = %v, want driver.ErrInvalidValue", err)
	}
	if _, err := evpool.NewPool(nil, evpool.PoolOptions{}).Get(); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Get from a pool without a device = %v, want driver.ErrInvalidValue", err)
	}
	hs := evpool.NewHandles[int](nil, nil)
	if _, err := hs.Get(s); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Get from Handles without create = %v, want driver.ErrInvalidValue", err)
	}
	if err := hs.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
}

// TestDeferredDrainBlocks starts Drain while the stream is gated: the
// callback must see that the gate was opened first.
func TestDeferredDrainBlocks(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	s := newStreams(t, dev, 1)[0]
	open := gate(t, h, s)
	var opened, ran atomic.Bool
	mustDefer(t, d, []driver.Stream{s}, func(error) {
		if !opened.Load() {
			t.Errorf("callback ran while its stream was gated")
		}
		ran.Store(true)
	})
	done := make(chan error)
	go func() { done <- d.Drain() }()
	opened.Store(true)
	open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !ran.Load() {
		t.Fatal("Drain returned before running the callback")
	}
}

// TestDeferredDeviceLost loses the device under pending entries: they run
// with driver.ErrDeviceLost, and later Defers fail.
func TestDeferredDeviceLost(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	ss := newStreams(t, dev, 2)
	gate(t, h, ss[0])
	rec := newRecorder()
	mustDefer(t, d, ss[:1], rec.fn("gated"))
	mustDefer(t, d, ss, rec.fn("both"))
	h.LoseDevice()
	d.Poll()
	for _, name := range []string{"gated", "both"} {
		if n, err := rec.ran(name); n != 1 || !errors.Is(err, driver.ErrDeviceLost) {
			t.Errorf("%s: ran %d, err %v; want once with driver.ErrDeviceLost", name, n, err)
		}
	}
	if err := d.Defer(ss, func(error) {}); !errors.Is(err, driver.ErrDeviceLost) {
		t.Errorf("Defer on a lost device = %v, want driver.ErrDeviceLost", err)
	}
	if got := d.Pending(); got != 0 {
		t.Errorf("Pending() = %d, want 0", got)
	}
}
