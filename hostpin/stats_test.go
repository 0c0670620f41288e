package hostpin

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
)

// pytorchHostStatKeys are the keys of PyTorch's torch.cuda.host_memory_stats()
// (the HostStats of ATen's CachingHostAllocator.h, flattened by
// torch/cuda/memory.py).
var pytorchHostStatKeys = func() []string {
	var keys []string
	for _, stat := range []string{"allocations", "allocated_bytes", "active_requests", "active_bytes"} {
		for _, m := range []string{"current", "peak", "allocated", "freed"} {
			keys = append(keys, stat+"."+m)
		}
	}
	for _, dur := range []string{"host_alloc_time", "host_free_time"} {
		for _, m := range []string{"total", "max", "min", "count", "avg"} {
			keys = append(keys, dur+"."+m)
		}
	}
	keys = append(keys, "num_host_alloc", "num_host_free")
	slices.Sort(keys)
	return keys
}()

// statsResetter is what Allocator and Direct add to resource for the stats.
type statsResetter interface {
	resource
	ResetPeakStats()
	ResetAccumulatedStats()
}

// checkMap compares m with want on every key but the times, and checks the
// times for consistency: count exact (want's "<name>.count"), min <= avg <=
// max <= total.
func checkMap(t *testing.T, when string, m, want map[string]int64) {
	t.Helper()
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, pytorchHostStatKeys) {
		t.Fatalf("%s: Map keys %v, want PyTorch's %v", when, got, pytorchHostStatKeys)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s: %s = %d, want %d", when, k, m[k], v)
		}
	}
	for _, d := range []string{"host_alloc_time", "host_free_time"} {
		total, longest, shortest, avg := m[d+".total"], m[d+".max"], m[d+".min"], m[d+".avg"]
		if shortest > avg || avg > longest || longest > total || (m[d+".count"] == 0 && total != 0) {
			t.Errorf("%s: %s total %d, max %d, min %d, avg %d: want min <= avg <= max <= total",
				when, d, total, longest, shortest, avg)
		}
	}
}

// TestStatsMap runs one script on an Allocator and on a Direct and checks
// every key of Map at two points: with a buffer waiting for its stream, and
// after it came back and the cache was emptied.
func TestStatsMap(t *testing.T) {
	const (
		k112 = 112 << 10 // class of 100 KiB
		mib  = 1 << 20
	)
	tests := []struct {
		name string
		open func(t *testing.T, dev driver.Device) statsResetter
		// Allocator: a 4 KiB request takes a 1 MiB slab; 100 KiB rounds to
		// 112 KiB and the second one is a hit. Direct: exact sizes, every
		// Alloc a driver call, every return a driver free.
		pending, after map[string]int64
	}{
		{
			name: "Allocator",
			open: func(t *testing.T, dev driver.Device) statsResetter { return newAlloc(t, dev, Options{}) },
			pending: map[string]int64{
				"allocations.current": 3, "allocations.peak": 3, "allocations.allocated": 3, "allocations.freed": 0,
				"allocated_bytes.current": 2*mib + k112, "allocated_bytes.peak": 2*mib + k112,
				"allocated_bytes.allocated": 2*mib + k112, "allocated_bytes.freed": 0,
				"active_requests.current": 3, "active_requests.peak": 3, "active_requests.allocated": 4, "active_requests.freed": 1,
				"active_bytes.current": 4096 + k112 + mib, "active_bytes.peak": 4096 + k112 + mib,
				"active_bytes.allocated": 4096 + 2*k112 + mib, "active_bytes.freed": k112,
				"num_host_alloc": 3, "num_host_free": 0, "host_alloc_time.count": 3, "host_free_time.count": 0,
			},
			after: map[string]int64{
				"allocations.current": 2, "allocations.peak": 3, "allocations.allocated": 3, "allocations.freed": 1,
				"allocated_bytes.current": mib + k112, "allocated_bytes.peak": 2*mib + k112,
				"allocated_bytes.allocated": 2*mib + k112, "allocated_bytes.freed": mib,
				"active_requests.current": 2, "active_requests.peak": 3, "active_requests.allocated": 4, "active_requests.freed": 2,
				"active_bytes.current": 4096 + k112, "active_bytes.peak": 4096 + k112 + mib,
				"active_bytes.allocated": 4096 + 2*k112 + mib, "active_bytes.freed": k112 + mib,
				"num_host_alloc": 3, "num_host_free": 1, "host_alloc_time.count": 3, "host_free_time.count": 1,
			},
		},
		{
			name: "Direct",
			open: func(t *testing.T, dev driver.Device) statsResetter { return newDirect(t, dev, DirectOptions{}) },
			pending: map[string]int64{
				"allocations.current": 3, "allocations.peak": 3, "allocations.allocated": 4, "allocations.freed": 1,
				"allocated_bytes.current": 4096 + 100<<10 + mib, "allocated_bytes.peak": 4096 + 100<<10 + mib,
				"allocated_bytes.allocated": 4096 + 200<<10 + mib, "allocated_bytes.freed": 100 << 10,
				"active_requests.current": 3, "active_requests.peak": 3, "active_requests.allocated": 4, "active_requests.freed": 1,
				"active_bytes.current": 4096 + 100<<10 + mib, "active_bytes.peak": 4096 + 100<<10 + mib,
				"active_bytes.allocated": 4096 + 200<<10 + mib, "active_bytes.freed": 100 << 10,
				"num_host_alloc": 4, "num_host_free": 1, "host_alloc_time.count": 4, "host_free_time.count": 1,
			},
			after: map[string]int64{
				"allocations.current": 2, "allocations.peak": 3, "allocations.allocated": 4, "allocations.freed": 2,
				"allocated_bytes.current": 4096 + 100<<10, "allocated_bytes.peak": 4096 + 100<<10 + mib,
				"allocated_bytes.allocated": 4096 + 200<<10 + mib, "allocated_bytes.freed": 100<<10 + mib,
				"active_requests.current": 2, "active_requests.peak": 3, "active_requests.allocated": 4, "active_requests.freed": 2,
				"active_bytes.current": 4096 + 100<<10, "active_bytes.peak": 4096 + 100<<10 + mib,
				"active_bytes.allocated": 4096 + 200<<10 + mib, "active_bytes.freed": 100<<10 + mib,
				"num_host_alloc": 4, "num_host_free": 2, "host_alloc_time.count": 4, "host_free_time.count": 2,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dev, sd := drivertest.OpenDevice(t, "sim", "")
			r := tc.open(t, dev)
			st := newStream(t, dev)
			alloc := func(n int) *Buffer {
				t.Helper()
				b, err := r.Alloc(n)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			free := func(b *Buffer) {
				t.Helper()
				if err := r.Free(b); err != nil {
					t.Fatal(err)
				}
			}
			small, mid, big := alloc(4096), alloc(100<<10), alloc(1<<20)
			free(mid)
			open, err := sd.Gate(st)
			if err != nil {
				t.Fatal(err)
			}
			defer open()
			if err := r.RecordStream(big, st); err != nil {
				t.Fatal(err)
			}
			free(big) // waits for the gate
			again := alloc(100 << 10)
			checkMap(t, "with a buffer waiting for its stream", r.Stats().Map(), tc.pending)

			open()
			if err := st.Synchronize(); err != nil {
				t.Fatal(err)
			}
			r.Poll()
			if c, ok := r.(interface{ EmptyCache() error }); ok {
				if err := c.EmptyCache(); err != nil {
					t.Fatal(err)
				}
			}
			checkMap(t, "after it came back and EmptyCache", r.Stats().Map(), tc.after)

			// The resets, as PyTorch's: peaks to the current values, the
			// accumulated counts and times to 0.
			r.ResetPeakStats()
			m := r.Stats().Map()
			for _, stat := range []string{"allocations", "allocated_bytes", "active_requests", "active_bytes"} {
				if m[stat+".peak"] != m[stat+".current"] {
					t.Errorf("after ResetPeakStats: %s.peak %d, want the current %d", stat, m[stat+".peak"], m[stat+".current"])
				}
			}
			for _, k := range []string{"host_alloc_time.max", "host_alloc_time.min", "host_free_time.max", "host_free_time.min"} {
				if m[k] != 0 {
					t.Errorf("after ResetPeakStats: %s = %d, want 0", k, m[k])
				}
			}
			r.ResetAccumulatedStats()
			want := map[string]int64{}
			for _, k := range pytorchHostStatKeys {
				want[k] = 0
			}
			for _, stat := range []string{"allocations", "allocated_bytes", "active_requests", "active_bytes"} {
				want[stat+".current"], want[stat+".peak"] = m[stat+".current"], m[stat+".peak"]
			}
			checkMap(t, "after both resets", r.Stats().Map(), want)
			if s := r.Stats(); s.Requests != 0 || s.Hits != 0 || s.Misses != 0 || s.Evictions != 0 {
				t.Errorf("after ResetAccumulatedStats: %+v; want the counts at 0", s)
			}

			// Counting goes on from the reset: current = at reset + allocated - freed.
			free(small)
			free(again)
			m2 := r.Stats().Map()
			for _, stat := range []string{"allocations", "allocated_bytes", "active_requests", "active_bytes"} {
				if got, want := m2[stat+".current"], m[stat+".current"]+m2[stat+".allocated"]-m2[stat+".freed"]; got != want {
					t.Errorf("after the frees: %s.current %d, want %d (at the reset) + allocated - freed = %d", stat, got, m[stat+".current"], want)
				}
			}
			if m2["active_requests.current"] != 0 || m2["active_requests.freed"] != 2 || m2["active_requests.peak"] != 2 {
				t.Errorf("after the frees: active_requests current %d, freed %d, peak %d; want 0, 2, 2",
					m2["active_requests.current"], m2["active_requests.freed"], m2["active_requests.peak"])
			}
		})
	}
}

// activeModel is what the test knows of the active buffers (in use, or
// freed behind a closed gate) since the last reset.
type activeModel struct {
	count, bytes                  int64
	peakCount, peakBytes          int64
	handedOut, returned           int64
	bytesHandedOut, bytesReturned int64
}

func (m *activeModel) handOut(n int) {
	m.count++
	m.bytes += int64(n)
	m.handedOut++
	m.bytesHandedOut += int64(n)
	m.peakCount = max(m.peakCount, m.count)
	m.peakBytes = max(m.peakBytes, m.bytes)
}

func (m *activeModel) giveBack(n int) {
	m.count--
	m.bytes -= int64(n)
	m.returned++
	m.bytesReturned += int64(n)
}

// TestStatsActiveModel drives random allocations, frees (some behind a
// gated stream, so they stay active), gate openings and both resets, and
// after every step checks the active buffers and bytes, their exact peaks
// (taken on the way down, not on the hit path) and the handed-out and
// returned counts against a model of its own.
func TestStatsActiveModel(t *testing.T) {
	eachResource(t, func(t *testing.T, dev driver.Device, sd *sim.Device, r resource) {
		rr := r.(statsResetter)
		st := newStream(t, dev)
		open, err := sd.Gate(st)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { open() }()
		rng := rand.New(rand.NewPCG(27, 5))
		sizes := []int{1, 3000, 4096, 9000, 70 << 10, 100 << 10, 1 << 20}
		var m activeModel
		var live, pending []*Buffer
		takeLive := func() *Buffer {
			i := rng.IntN(len(live))
			b := live[i]
			live = slices.Delete(live, i, i+1)
			return b
		}
		for step := range 3000 {
			var what string
			switch op := rng.IntN(100); {
			case op < 40 || len(live) == 0:
				what = "alloc"
				b, err := r.Alloc(sizes[rng.IntN(len(sizes))])
				if err != nil {
					t.Fatal(err)
				}
				live = append(live, b)
				m.handOut(b.Cap())
			case op < 65:
				what = "free"
				b := takeLive()
				if err := r.Free(b); err != nil {
					t.Fatal(err)
				}
				m.giveBack(b.Cap())
			case op < 85:
				what = "free behind the gate"
				b := takeLive()
				if err := r.RecordStream(b, st); err != nil {
					t.Fatal(err)
				}
				if err := r.Free(b); err != nil {
					t.Fatal(err)
				}
				pending = append(pending, b)
			case op < 92:
				what = "open the gate"
				open()
				if err := st.Synchronize(); err != nil {
					t.Fatal(err)
				}
				r.Poll()
				for _, b := range pending {
					m.giveBack(b.Cap())
				}
				pending = pending[:0]
				if open, err = sd.Gate(st); err != nil {
					t.Fatal(err)
				}
			case op < 96:
				what = "ResetPeakStats"
				rr.ResetPeakStats()
				m.peakCount, m.peakBytes = m.count, m.bytes
			default:
				what = "ResetAccumulatedStats"
				rr.ResetAccumulatedStats()
				m.handedOut, m.returned, m.bytesHandedOut, m.bytesReturned = 0, 0, 0, 0
			}
			s := r.Stats()
			got := activeModel{
				count: s.ActiveBuffers, bytes: s.BytesInUse + s.BytesPending,
				peakCount: s.PeakActiveBuffers, peakBytes: s.PeakActiveBytes,
				handedOut: int64(s.BuffersHandedOut), returned: int64(s.BuffersReturned),
				bytesHandedOut: s.BytesHandedOut, bytesReturned: s.BytesReturned,
			}
			if got != m {
				t.Fatalf("step %d (%s):\n got %+v\nwant %+v", step, what, got, m)
			}
		}
	})
}

// TestStatsConcurrent: goroutines allocate, record streams and free while
// another resets the peaks and the accumulated counts and reads Stats; every
// snapshot is consistent (no peak below its current value, nothing
// negative), and once all is back nothing is active and no count wrapped.
func TestStatsConcurrent(t *testing.T) {
	eachResource(t, func(t *testing.T, dev driver.Device, _ *sim.Device, r resource) {
		rr := r.(statsResetter)
		streams := []driver.Stream{newStream(t, dev), newStream(t, dev)}
		sizes := []int{3000, 9000, 70 << 10, 300 << 10}
		var wg sync.WaitGroup
		errc := make(chan error, 8)
		done := make(chan struct{})
		for g := range 4 {
			wg.Go(func() {
				for i := range 400 {
					b, err := r.Alloc(sizes[(g+i)%len(sizes)])
					if err != nil {
						errc <- err
						return
					}
					if i%3 == 0 {
						if err := r.RecordStream(b, streams[i%2]); err != nil {
							errc <- err
							return
						}
					}
					if err := r.Free(b); err != nil {
						errc <- err
						return
					}
				}
			})
		}
		var checker sync.WaitGroup
		checker.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				switch i % 3 {
				case 0:
					rr.ResetPeakStats()
				case 1:
					rr.ResetAccumulatedStats()
				}
				if err := consistent(r.Stats()); err != nil {
					errc <- err
					return
				}
			}
		})
		wg.Wait()
		close(done)
		checker.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		for _, s := range streams {
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
		}
		r.Poll()
		s := r.Stats()
		if err := consistent(s); err != nil {
			t.Error(err)
		}
		if s.ActiveBuffers != 0 || s.BytesInUse+s.BytesPending != 0 || s.Hits+s.Misses != s.Requests {
			t.Errorf("after the churn: %+v; want nothing active and every request a hit or a miss", s)
		}
	})
}

// consistent checks what holds of any snapshot, however it races with
// counting and resets.
func consistent(s Stats) error {
	const huge = 1 << 40 // a wrapped uint64 or a negative int64 is beyond it
	switch {
	case s.ActiveBuffers < 0 || s.BytesInUse < 0 || s.BytesPending < 0 || s.UnitsReserved < 0 || s.BytesReserved < 0:
		return fmt.Errorf("a current value below 0: %+v", s)
	case s.PeakActiveBuffers < s.ActiveBuffers || s.PeakActiveBytes < s.BytesInUse+s.BytesPending ||
		s.PeakUnitsReserved < s.UnitsReserved || s.PeakReserved < s.BytesReserved || s.PeakInUse < s.BytesInUse:
		return fmt.Errorf("a peak below its current value: %+v", s)
	case s.Requests > huge || s.Misses > huge || s.Hits > huge || s.BuffersHandedOut > huge || s.BuffersReturned > huge:
		return fmt.Errorf("a count wrapped: %+v", s)
	case s.BytesHandedOut < 0 || s.BytesReturned < 0 || s.DriverAllocBytes < 0 || s.DriverFreeBytes < 0:
		return fmt.Errorf("a cumulative byte count below 0: %+v", s)
	}
	return nil
}
