package devalloc

import (
	"math/rand/v2"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// TestPeaksExactUnderSlack checks every peak against one the test keeps
// itself, after each operation of a random mix over two streams and both
// pools, with RecordStream (pending frees), EmptyCache and
// ResetPeakStats. The statistics a hit counts (hotStat) skip their peak
// checks while they fit under counters.slack; a slack that overstated the
// room in any pool or in "all" would leave a peak below a current seen
// here. Those statistics only rise in an Alloc and only fall in the other
// calls, so the highest current seen after each call is the peak.
func TestPeaksExactUnderSlack(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, "")
	ss := append([]driver.Stream{dev.DefaultStream()}, streams(t, dev, 1)...)
	r := rand.New(rand.NewPCG(7, 41))
	var live []driver.Ptr
	var peak [numStatArrays]StatArray
	check := func(op string) {
		t.Helper()
		st := a.Stats()
		arrs := [numStatArrays]StatArray{st.Allocation, st.Segment, st.Active, st.InactiveSplit,
			st.AllocatedBytes, st.ReservedBytes, st.ActiveBytes, st.InactiveSplitBytes, st.RequestedBytes}
		for k, arr := range arrs {
			if !hotStat(k) {
				continue
			}
			for p, s := range arr {
				peak[k][p].Peak = max(peak[k][p].Peak, s.Current)
				if s.Peak != peak[k][p].Peak {
					t.Fatalf("after %s: %s pool %d: peak %d, want %d (current %d)",
						op, statArrayNames[k], p, s.Peak, peak[k][p].Peak, s.Current)
				}
			}
		}
	}
	for i := range 4000 {
		switch x := r.IntN(100); {
		case x < 50 || len(live) == 0:
			size := uint64(1) << (9 + r.IntN(14)) // 512 B .. 4 MiB: both pools
			size += r.Uint64N(size)
			p, err := a.Alloc(size, ss[r.IntN(2)])
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, p)
			check("alloc")
		case x < 92:
			j := r.IntN(len(live))
			if r.IntN(8) == 0 {
				if err := a.RecordStream(live[j], ss[r.IntN(2)]); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Free(live[j]); err != nil {
				t.Fatal(err)
			}
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
			check("free")
		case x < 97:
			a.Poll()
			check("poll")
		case x < 99:
			a.ResetPeakStats()
			st := a.Stats()
			arrs := [numStatArrays]StatArray{st.Allocation, st.Segment, st.Active, st.InactiveSplit,
				st.AllocatedBytes, st.ReservedBytes, st.ActiveBytes, st.InactiveSplitBytes, st.RequestedBytes}
			for k, arr := range arrs {
				for p, s := range arr {
					peak[k][p].Peak = s.Current
				}
			}
			check("reset")
		default:
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
			check("empty cache")
		}
		if i%1000 == 999 { // back to an empty pool, below every peak
			for _, p := range live {
				if err := a.Free(p); err != nil {
					t.Fatal(err)
				}
			}
			live = live[:0]
			check("free all")
		}
	}
}

// TestPeakOfAllUnderSlack: the "all" entry's room can be the smaller one
// while the pool that allocates has plenty: the small pool peaked at 10 MiB
// and is empty, the large pool holds 9 MiB, so small hits have 10 MiB of
// room in their pool and 1 MiB in "all". The third 512 KiB hit passes the
// "all" peak.
func TestPeakOfAllUnderSlack(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, "")
	s := dev.DefaultStream()
	var ps []driver.Ptr
	for range 20 {
		ps = append(ps, mustAlloc(t, a, 512*kib, s))
	}
	for _, p := range ps {
		mustFree(t, a, p)
	}
	mustAlloc(t, a, 9*mib, s)
	for i := range 4 {
		mustAlloc(t, a, 512*kib, s)
		st := a.Stats()
		for k, arr := range map[string]StatArray{"allocated_bytes": st.AllocatedBytes,
			"active_bytes": st.ActiveBytes, "requested_bytes": st.RequestedBytes} {
			if all := arr.All(); all.Peak < all.Current {
				t.Fatalf("after hit %d: %s.all peak %d below current %d", i+1, k, all.Peak, all.Current)
			}
		}
	}
}
