package evpool_test

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/evpool"
)

func setOf(ss ...driver.Stream) evpool.StreamSet {
	var set evpool.StreamSet
	for _, s := range ss {
		set.Add(s)
	}
	return set
}

func TestStreamSet(t *testing.T) {
	drv := drivertest.OpenDriver(t, "sim", "devices=2,"+simDSN)
	dev0 := deviceOf(t, drv, 0)
	dev1 := deviceOf(t, drv, 1)
	ss := newStreams(t, dev0, 3)

	var set evpool.StreamSet
	if set.Len() != 0 || set.Has(ss[0]) {
		t.Fatal("zero StreamSet is not empty")
	}
	for _, s := range []driver.Stream{ss[0], ss[1], ss[0], nil, ss[2], ss[1]} {
		set.Add(s)
	}
	if got, want := set.IDs(), []uint64{ss[0].ID(), ss[1].ID(), ss[2].ID()}; !equalIDs(got, want) {
		t.Fatalf("IDs after adds with duplicates and nil = %v, want %v", got, want)
	}
	if !set.Remove(ss[1]) || set.Remove(ss[1]) {
		t.Fatal("Remove: want true once, then false")
	}
	if got, want := set.IDs(), []uint64{ss[0].ID(), ss[2].ID()}; !equalIDs(got, want) {
		t.Fatalf("IDs after Remove = %v, want %v (order kept)", got, want)
	}

	// The default streams of two devices share ID 0 but are not the same.
	d0, d1 := dev0.DefaultStream(), dev1.DefaultStream()
	if evpool.SameStream(d0, d1) {
		t.Fatal("SameStream: default streams of devices 0 and 1 compare equal")
	}
	if !evpool.SameStream(d0, dev0.DefaultStream()) || !evpool.SameStream(nil, nil) || evpool.SameStream(d0, nil) {
		t.Fatal("SameStream: wrong answer for the same stream or nil")
	}
	var two evpool.StreamSet
	two.Add(d0)
	if !two.Add(d1) || two.Len() != 2 {
		t.Fatal("a StreamSet must hold the default streams of two devices apart")
	}
	two.AddSet(set)
	if two.Len() != 4 {
		t.Fatalf("AddSet: Len = %d, want 4", two.Len())
	}
}

func equalIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReleaseEmptyRunsNow(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	n := 0
	if err := d.Release(evpool.StreamSet{}, func() { n++ }); err != nil || n != 1 {
		t.Fatalf("Release of no streams: err %v, ran %d times, want nil and 1", err, n)
	}
	if err := d.Release(evpool.StreamSet{}, nil); !errors.Is(err, driver.ErrInvalidValue) {
		t.Fatalf("Release(nil func) = %v, want ErrInvalidValue", err)
	}
}

func TestReleaseWaitsForStreams(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	ss := newStreams(t, dev, 2)
	open := gate(t, h, ss[1])

	var n atomic.Int32
	if err := d.Release(setOf(ss...), func() { n.Add(1) }); err != nil {
		t.Fatal(err)
	}
	syncAll(ss[0])
	if d.Poll(); n.Load() != 0 {
		t.Fatal("released while stream 1 still had work queued")
	}
	open()
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 {
		t.Fatalf("released %d times after Drain, want 1", n.Load())
	}
}

// TestReleaseFallbackWaitsOnTheHost: when no event can be recorded,
// Release waits for the stream's work on the host and releases after it,
// also for a stream the user destroyed with work still queued.
func TestReleaseFallbackWaitsOnTheHost(t *testing.T) {
	for _, destroy := range []bool{false, true} {
		name := "live stream"
		if destroy {
			name = "destroyed stream"
		}
		t.Run(name, func(t *testing.T) {
			dev, h := drivertest.OpenDevice(t, "sim", simDSN)
			_, d := newDeferred(t, dev)
			s, err := dev.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			open := gate(t, h, s)
			if destroy {
				// The user destroyed the stream with work still queued:
				// no event can be recorded on it and its own Synchronize
				// fails, but the work still runs, and must end first.
				if err := s.Destroy(); err != nil {
					t.Fatal(err)
				}
			} else {
				t.Cleanup(func() { s.Destroy() })
			}
			h.SetFaultRate(1, 1) // every Record (and NewEvent) fails
			defer h.SetFaultRate(0, 0)

			var opened atomic.Bool
			go func() {
				// Not a timing assertion: the delay only gives an early
				// release the chance to show.
				time.Sleep(20 * time.Millisecond)
				opened.Store(true)
				open()
			}()
			ran, early := 0, false
			err = d.Release(setOf(s), func() {
				ran++
				early = !opened.Load()
			})
			if err != nil {
				t.Fatalf("Release = %v, want nil (the host wait succeeds)", err)
			}
			if ran != 1 || early {
				t.Fatalf("release ran %d times (want 1), before the gated work ended: %v", ran, early)
			}
			if d.Pending() != 0 {
				t.Fatalf("Pending = %d after a fallback release, want 0", d.Pending())
			}
		})
	}
}

func TestReleaseNotReleasedHandsBack(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	ss := newStreams(t, dev, 1)
	h.LoseDevice()
	ran := 0
	err := d.Release(setOf(ss[0]), func() { ran++ })
	if !errors.Is(err, evpool.ErrNotReleased) || !errors.Is(err, driver.ErrDeviceLost) {
		t.Fatalf("Release on a lost device = %v, want ErrNotReleased wrapping ErrDeviceLost", err)
	}
	if ran != 0 {
		t.Fatal("release ran although nothing showed the stream's work over")
	}
	if d.Pending() != 0 {
		t.Fatalf("Pending = %d, want 0: a release handed back must leave nothing deferred", d.Pending())
	}
	d.Drain()
	if ran != 0 {
		t.Fatal("a release handed back ran later")
	}
}

// TestReleaseStress releases from many goroutines while event records fail
// at random: each release runs exactly once, none before its stream's
// is lost.
func TestReleaseStress(t *testing.T) {
	dev, h := drivertest.OpenDevice(t, "sim", simDSN)
	_, d := newDeferred(t, dev)
	ss := newStreams(t, dev, 4)
	h.SetFaultRate(7, 0.3)
	defer h.SetFaultRate(0, 0)

	const workers, each = 4, 200
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		runs = map[int]int{}
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range each {
				id := w*each + i
				var set evpool.StreamSet
				for _, s := range ss {
					if r.IntN(2) == 0 {
						set.Add(s)
					}
				}
				err := d.Release(set, func() {
					mu.Lock()
					runs[id]++
					mu.Unlock()
				})
				if err != nil {
					t.Errorf("release %d: %v (the host wait cannot fail here)", id, err)
				}
				if i%16 == 0 {
					d.Poll()
				}
			}
		}()
	}
	wg.Wait()
	h.SetFaultRate(0, 0)
	if err := d.Drain(); err != nil {
		t.Fatal(err)
	}
	if len(runs) != workers*each {
		t.Fatalf("%d of %d releases ran", len(runs), workers*each)
	}
	for id, n := range runs {
		if n != 1 {
			t.Fatalf("release %d ran %d times", id, n)
		}
	}
}
