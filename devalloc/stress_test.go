package devalloc

import (
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// mixedSize draws a size log-uniformly from [lo, hi], so small sizes are
// as common per octave as large ones (like real tensor mixes).
func mixedSize(r *rand.Rand, lo, hi uint64) uint64 {
	l, h := bits.Len64(lo)-1, bits.Len64(hi)-1
	n := uint64(1) << (l + r.IntN(h-l+1))
	n += r.Uint64N(n)
	return max(lo, min(hi, n))
}

type stressOpts struct {
	conf       string
	dsn        string
	goroutines int
	streams    int
	ops        int
	maxSize    uint64
	faultRate  float64
	snapshots  bool
	emptyCache bool // a goroutine releases the cache all along, so free sets are dropped and made again under the others
}

type live struct {
	p    driver.Ptr
	size uint64
}

// runStress churns the allocator from many goroutines over many streams:
// mixed sizes, RecordStream on other streams (with real work queued there),
// and frees handed to other goroutines. The shadow checker watches every
// live range. It returns the allocator for end-state checks.
func runStress(t *testing.T, o stressOpts) (*Allocator, driver.Device) {
	dev, h := drivertest.OpenDevice(t, "sim", o.dsn)
	a := newAlloc(t, dev, o.conf)
	ss := append([]driver.Stream{dev.DefaultStream()}, streams(t, dev, o.streams-1)...)
	sh := newShadow()
	handoff := make([]chan live, o.goroutines)
	for i := range handoff {
		handoff[i] = make(chan live, 64)
	}
	if o.faultRate > 0 {
		h.SetFaultRate(42, o.faultRate)
	}
	var oom, otherErr atomic.Int64
	var wg, snapWG sync.WaitGroup
	stop := make(chan struct{})
	if o.snapshots {
		snapWG.Add(1)
		go func() {
			defer snapWG.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				consistent(t, a.Snapshot())
				if n > 50 {
					return
				}
			}
		}()
	}
	if o.emptyCache {
		snapWG.Add(1)
		go func() {
			defer snapWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := a.EmptyCache(); err != nil && o.faultRate == 0 {
					t.Errorf("EmptyCache: %v", err)
				}
				checkIndexes(t, a)
			}
		}()
	}
	freeOne := func(x live) {
		sh.remove(x.p)
		if err := a.Free(x.p); err != nil {
			t.Errorf("Free(%v): %v", x.p, err)
		}
	}
	for g := range o.goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			var mine []live
			for range o.ops {
				// Free what other goroutines handed over.
				for drained := false; !drained; {
					select {
					case x := <-handoff[g]:
						freeOne(x)
					default:
						drained = true
					}
				}
				s := ss[r.IntN(len(ss))]
				size := mixedSize(r, 128, o.maxSize)
				p, err := a.Alloc(size, s)
				if err != nil {
					if IsOOM(err) {
						oom.Add(1)
					} else {
						otherErr.Add(1)
					}
				} else {
					sh.add(p, size)
					if r.IntN(4) == 0 {
						u := ss[r.IntN(len(ss))]
						if err := a.RecordStream(p, u); err != nil {
							t.Errorf("RecordStream: %v", err)
						}
						if err := dev.Memset(p, byte(g), min(size, 4096), u); err != nil && o.faultRate == 0 {
							t.Errorf("Memset: %v", err)
						}
					}
					mine = append(mine, live{p, size})
				}
				for len(mine) > 6 || (len(mine) > 0 && r.IntN(3) == 0) {
					i := r.IntN(len(mine))
					x := mine[i]
					mine = append(mine[:i], mine[i+1:]...)
					select {
					case handoff[(g+1)%o.goroutines] <- x:
					default:
						freeOne(x)
					}
				}
			}
			for _, x := range mine {
				freeOne(x)
			}
		}()
	}
	wg.Wait()
	close(stop)
	snapWG.Wait()
	for _, ch := range handoff {
		close(ch)
		for x := range ch {
			freeOne(x)
		}
	}
	if o.faultRate > 0 {
		h.SetFaultRate(0, 0)
	}
	sh.check(t)
	if o.faultRate == 0 && otherErr.Load() > 0 {
		t.Errorf("%d non-OOM errors without fault injection", otherErr.Load())
	}
	t.Logf("%s: ooms %d, other errors %d, stats %v", o.conf, oom.Load(), otherErr.Load(), a.Stats().Map()["num_alloc_retries"])
	return a, dev
}

func checkDrained(t *testing.T, a *Allocator) {
	t.Helper()
	if err := a.Drain(); err != nil {
		t.Fatalf("Synchronize: %v", err)
	}
	st := a.Stats()
	if st.AllocatedBytes.All().Current != 0 || st.ActiveBytes.All().Current != 0 || st.Allocation.All().Current != 0 || st.RequestedBytes.All().Current != 0 {
		t.Errorf("in use at the end: allocated %d active %d allocations %d requested %d",
			st.AllocatedBytes.All().Current, st.ActiveBytes.All().Current, st.Allocation.All().Current, st.RequestedBytes.All().Current)
	}
	consistent(t, a.Snapshot())
	if err := a.EmptyCache(); err != nil {
		t.Fatalf("EmptyCache: %v", err)
	}
	st = a.Stats()
	if st.ReservedBytes.All().Current != 0 || st.Segment.All().Current != 0 || st.InactiveSplit.All().Current != 0 {
		t.Errorf("after EmptyCache: reserved %d segments %d inactive_split %d, want 0",
			st.ReservedBytes.All().Current, st.Segment.All().Current, st.InactiveSplit.All().Current)
	}
	if a.reserved.Load() != 0 {
		t.Errorf("limit accounting: %d bytes still reserved", a.reserved.Load())
	}
}

func TestRaceStress(t *testing.T) {
	ops := 1500
	if testing.Short() {
		ops = 200
	}
	for _, conf := range []string{"", "expandable_segments:true", "cross_stream_reuse:true,max_split_size_mb:32,history_entries:256", "roundup_power2_divisions:4"} {
		t.Run(conf, func(t *testing.T) {
			a, _ := runStress(t, stressOpts{conf: conf, dsn: "capacity=2GiB", goroutines: 8, streams: 6, ops: ops, maxSize: 64 * mib, snapshots: true})
			checkDrained(t, a)
		})
	}
}

// TestStressSetsComeAndGo churns many streams while another goroutine
// releases the cache, so that free sets are dropped and created again under
// concurrent allocations and frees (and grows with the lock released).
func TestStressSetsComeAndGo(t *testing.T) {
	ops := 1000
	if testing.Short() {
		ops = 150
	}
	for _, conf := range []string{"", "expandable_segments:true", "cross_stream_reuse:true,garbage_collection_threshold:0.5"} {
		t.Run(conf, func(t *testing.T) {
			a, _ := runStress(t, stressOpts{conf: conf, dsn: "capacity=256MiB", goroutines: 6, streams: 24, ops: ops, maxSize: 8 * mib, emptyCache: true})
			checkIndexes(t, a)
			checkDrained(t, a)
			if a.numSets != 0 {
				t.Errorf("%d free sets left after everything was freed and released", a.numSets)
			}
		})
	}
}

func TestFaultInjection(t *testing.T) {
	for _, conf := range []string{"", "expandable_segments:true"} {
		t.Run(conf, func(t *testing.T) {
			a, _ := runStress(t, stressOpts{conf: conf, dsn: "capacity=512MiB", goroutines: 4, streams: 4, ops: 200, maxSize: 16 * mib, faultRate: 0.05})
			st := a.Stats()
			if st.NumAllocRetries == 0 {
				t.Errorf("no retries at a 5%% fault rate: the OOM retry path was not exercised")
			}
			checkDrained(t, a)
		})
	}
}

func TestOOMUnderPressure(t *testing.T) {
	// A small device: allocations fail with OOMError and nothing leaks.
	for _, conf := range []string{"", "expandable_segments:true"} {
		t.Run(conf, func(t *testing.T) {
			a, _ := runStress(t, stressOpts{conf: conf, dsn: "capacity=64MiB", goroutines: 4, streams: 3, ops: 150, maxSize: 24 * mib})
			if st := a.Stats(); st.NumOOMs == 0 {
				t.Logf("no OOM happened (fine, but the pressure path was not hit)")
			}
			checkDrained(t, a)
		})
	}
}
