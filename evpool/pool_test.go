package evpool_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/evpool"
)

func TestPoolStats(t *testing.T) {
	tests := []struct {
		name    string
		maxIdle int
		gets    int // events taken, then all put back
		again   int // events taken again after that
		want    evpool.PoolStats
	}{
		{"fits", 4, 3, 3, evpool.PoolStats{Created: 3, Reused: 3, Idle: 0}},
		{"overflow", 2, 5, 4, evpool.PoolStats{Created: 7, Reused: 2, Idle: 0, Destroyed: 3}},
		{"zero is the default", 0, 3, 3, evpool.PoolStats{Created: 3, Reused: 3, Idle: 0}},
		{"keep none", -1, 3, 2, evpool.PoolStats{Created: 5, Destroyed: 3}},
		{"any negative is none", -7, 2, 1, evpool.PoolStats{Created: 3, Destroyed: 2}},
		{"partial reuse", 8, 2, 1, evpool.PoolStats{Created: 2, Reused: 1, Idle: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev, h := drivertest.OpenDevice(t, "sim", simDSN)
			p := evpool.NewPool(dev, evpool.PoolOptions{MaxIdle: tt.maxIdle})
			defer p.Close()
			before := h.Stats().EventsCreated
			var evs []driver.Event
			for range tt.gets {
				e, err := p.Get()
				if err != nil {
					t.Fatal(err)
				}
				evs = append(evs, e)
			}
			for _, e := range evs {
				p.Put(e)
			}
			for range tt.again {
				if _, err := p.Get(); err != nil {
					t.Fatal(err)
				}
			}
			if got := p.Stats(); got != tt.want {
				t.Errorf("Stats() = %+v, want %+v", got, tt.want)
			}
			if got := h.Stats().EventsCreated - before; got != tt.want.Created {
				t.Errorf("device created %d events, pool says %d", got, tt.want.Created)
			}
		})
	}
}

func TestPoolReusedEventWorks(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	p := evpool.NewPool(dev, evpool.PoolOptions{})
	defer p.Close()
	s := newStreams(t, dev, 1)[0]
	e, err := p.Get()
	if err != nil {
		t.Fatal(err)
	}
	p.Put(e)
	e2, err := p.Get()
	if err != nil {
		t.Fatal(err)
	}
	if e2 != e {
		t.Fatalf("Get after Put returned a different event")
	}
	if err := e2.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := e2.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if p.Device() != dev {
		t.Errorf("Device() is not the pool's device")
	}
}

func TestPoolClose(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	p := evpool.NewPool(dev, evpool.PoolOptions{})
	idle, _ := p.Get()
	held, _ := p.Get()
	p.Put(idle)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// The strict device reports use of a destroyed event.
	if _, err := idle.Query(); err == nil {
		t.Errorf("idle event still usable after Close: Close did not destroy it")
	}
	if _, err := p.Get(); !errors.Is(err, evpool.ErrClosed) || !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Get after Close: err = %v, want evpool.ErrClosed wrapping driver.ErrClosed", err)
	}
	p.Put(held)
	if _, err := held.Query(); err == nil {
		t.Errorf("event Put after Close was not destroyed")
	}
	want := evpool.PoolStats{Created: 2, Destroyed: 2}
	if got := p.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestPoolForeignEvent(t *testing.T) {
	drv := drivertest.OpenDriver(t, "sim", "devices=2,"+simDSN)
	dev0 := deviceOf(t, drv, 0)
	dev1 := deviceOf(t, drv, 1)
	p := evpool.NewPool(dev0, evpool.PoolOptions{})
	defer p.Close()
	e, err := dev1.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	p.Put(e)
	if _, err := e.Query(); err == nil {
		t.Errorf("foreign event was not destroyed")
	}
	want := evpool.PoolStats{Destroyed: 1, Foreign: 1}
	if got := p.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	p.Put(nil) // no effect
	if got := p.Stats(); got != want {
		t.Errorf("after Put(nil): Stats() = %+v, want %+v", got, want)
	}
}

func TestPoolConcurrent(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	const maxIdle = 8
	p := evpool.NewPool(dev, evpool.PoolOptions{MaxIdle: maxIdle})
	ss := newStreams(t, dev, 4)
	const workers, iters = 8, 200
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			s := ss[w%len(ss)]
			for i := range iters {
				n := 1 + i%3 // take a few at once so the idle set both fills and empties
				evs := make([]driver.Event, 0, n)
				for range n {
					e, err := p.Get()
					if err != nil {
						errc <- err
						return
					}
					if err := e.Record(s); err != nil {
						errc <- err
						return
					}
					evs = append(evs, e)
				}
				for _, e := range evs {
					if err := e.Synchronize(); err != nil {
						errc <- err
						return
					}
					p.Put(e)
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Idle > maxIdle {
		t.Errorf("Idle = %d, above MaxIdle %d", st.Idle, maxIdle)
	}
	if st.Created != st.Idle+st.Destroyed {
		t.Errorf("every event is back, so Created (%d) should be Idle (%d) + Destroyed (%d)", st.Created, st.Idle, st.Destroyed)
	}
	var gets uint64
	for i := range iters {
		gets += uint64(workers * (1 + i%3))
	}
	if st.Created+st.Reused != gets {
		t.Errorf("Created+Reused = %d, want the %d Gets", st.Created+st.Reused, gets)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Idle != 0 || st.Created != st.Destroyed {
		t.Errorf("after Close: %+v, want nothing idle and every event destroyed", st)
	}
}
