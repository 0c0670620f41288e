package devalloc

import (
	"testing"
	"time"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
)

// TestReleaseBeforeGrow checks the default policy against PyTorch's: a miss
// that needs a new segment first gives back cached whole segments of the
// large pool, oldest freed first, only as many as cover the new segment,
// and never small-pool ones.
func TestReleaseBeforeGrow(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "capacity=1GiB")
	s := dev.DefaultStream()
	for _, tc := range []struct {
		conf     string
		released int64 // segments released before growing
		reserved int64 // MiB reserved after the last Alloc
	}{
		// 40 + 30 + 2 (small) cached; a 50 MiB miss releases the two
		// large ones, oldest first (40 does not cover 50 alone).
		{"", 2, 2 + 50},
		// PyTorch: everything stays cached.
		{"release_before_grow:false", 0, 40 + 30 + 2 + 50},
	} {
		t.Run(tc.conf, func(t *testing.T) {
			a := newAlloc(t, dev, tc.conf)
			frees := sd.Stats().Frees
			p := mustAlloc(t, a, 40*mib, s)
			q := mustAlloc(t, a, 30*mib, s)
			r := mustAlloc(t, a, 1000, s) // a 2 MiB small-pool segment
			mustFree(t, a, r)             // the oldest, but of the small pool
			mustFree(t, a, p)
			mustFree(t, a, q)
			x := mustAlloc(t, a, 50*mib, s)
			st := a.Stats()
			if st.NumGrowReleases != tc.released || st.ReservedBytes.All().Current != tc.reserved*mib {
				t.Errorf("released %d segments, reserved %d MiB; want %d, %d MiB",
					st.NumGrowReleases, st.ReservedBytes.All().Current/mib, tc.released, tc.reserved)
			}
			if got := int64(sd.Stats().Frees - frees); got != tc.released || st.NumDeviceFree != tc.released {
				t.Errorf("driver frees %d (stat %d), want %d", got, st.NumDeviceFree, tc.released)
			}
			if st.Segment.Small().Current != 1 {
				t.Errorf("small-pool segments %d, want the cached one kept", st.Segment.Small().Current)
			}
			mustFree(t, a, x)
			checkIndexes(t, a)
		})
	}
	t.Run("oldest first, only what covers the new segment", func(t *testing.T) {
		a := newAlloc(t, dev, "")
		sizes := []uint64{24 * mib, 26 * mib, 28 * mib, 12 * mib} // a segment each
		ps := make([]driver.Ptr, len(sizes))
		for i, n := range sizes {
			ps[i] = mustAlloc(t, a, n, s)
		}
		for _, i := range []int{2, 0, 1, 3} { // freed: 28, 24, 26, 12
			mustFree(t, a, ps[i])
		}
		x := mustAlloc(t, a, 22*mib, s) // a hit: the 24 MiB block, split
		if st := a.Stats(); st.NumGrowReleases != 0 {
			t.Fatalf("a hit released %d segments", st.NumGrowReleases)
		}
		// A miss for a 30 MiB segment: the whole free segments are 28, 26
		// and 12, oldest first; 28 + 26 cover 30, so 12 stays.
		y := mustAlloc(t, a, 30*mib, s)
		st := a.Stats()
		if st.NumGrowReleases != 2 || st.ReservedBytes.All().Current != (24+12+30)*mib {
			t.Errorf("released %d, reserved %d MiB; want 2 (28 and 26 MiB), 66 MiB", st.NumGrowReleases, st.ReservedBytes.All().Current/mib)
		}
		mustFree(t, a, x)
		mustFree(t, a, y)
		checkIndexes(t, a)
	})
}

// TestReleaseBeforeGrowStreamSafe shows that release-before-growing never
// frees a segment (or, with expandable segments, unmaps pages) whose stream
// work is pending: a block noted on another stream keeps its memory until
// that work is done, and a block freed on its own stream with work still
// queued there goes back to the driver only after that work has run.
func TestReleaseBeforeGrowStreamSafe(t *testing.T) {
	// released counts the driver calls that give memory back.
	released := func(sd *sim.Device) uint64 { st := sd.Stats(); return st.Frees + st.MemUnmaps }
	for _, conf := range []string{"", "expandable_segments:true"} {
		mode := map[string]string{"": "plain: ", "expandable_segments:true": "expandable: "}[conf]
		t.Run(mode+"pending free on a noted stream", func(t *testing.T) {
			dev, sd := drivertest.OpenDevice(t, "sim", "capacity=1GiB")
			a := newAlloc(t, dev, conf)
			s := dev.DefaultStream()
			ss := streams(t, dev, 2)
			other, third := ss[0], ss[1]
			p := mustAlloc(t, a, 30*mib, s)
			open := memsetBehindGate(t, sd, other, p, 30*mib)
			if err := a.RecordStream(p, other); err != nil {
				t.Fatal(err)
			}
			mustFree(t, a, p) // pending: other's memset has not run
			x := mustAlloc(t, a, 40*mib, third)
			if st := a.Stats(); st.NumGrowReleases != 0 || released(sd) != 0 {
				t.Fatalf("with the noted stream's work pending: %d releases, %d driver frees or unmaps; want none",
					st.NumGrowReleases, released(sd))
			}
			if !hasBlockState(a.Snapshot(), uint64(p), memsnap.StateActivePendingFree) {
				t.Fatal("the block is not pending free in the snapshot")
			}
			open()
			if err := a.Drain(); err != nil {
				t.Fatal(err)
			}
			if err := other.Synchronize(); err != nil {
				t.Fatalf("the noted stream's work failed: %v", err)
			}
			// Now the block is free: the next miss on another stream
			// releases its memory.
			y := mustAlloc(t, a, 50*mib, third)
			if st := a.Stats(); st.NumGrowReleases != 1 || released(sd) != 1 {
				t.Fatalf("after the work finished: %d releases, %d driver frees or unmaps; want 1, 1", st.NumGrowReleases, released(sd))
			}
			mustFree(t, a, x)
			mustFree(t, a, y)
			checkIndexes(t, a)
		})
		t.Run(mode+"work still queued on the owner stream", func(t *testing.T) {
			dev, sd := drivertest.OpenDevice(t, "sim", "capacity=1GiB")
			a := newAlloc(t, dev, conf)
			s := dev.DefaultStream()
			other := streams(t, dev, 1)[0]
			p := mustAlloc(t, a, 30*mib, s)
			open := memsetBehindGate(t, sd, s, p, 30*mib)
			mustFree(t, a, p) // reusable on s at once: s runs in order
			done := make(chan error, 1)
			go func() {
				// A miss on another stream: p's memory is the oldest free.
				x, err := a.Alloc(40*mib, other)
				if err == nil {
					err = a.Free(x)
				}
				done <- err
			}()
			if conf == "" {
				// Plain: the release waits for s (outside the allocator's
				// lock, as cudaFree would); the driver frees nothing while
				// the gate holds s's memset back.
				time.Sleep(50 * time.Millisecond)
				if n := released(sd); n != 0 {
					t.Fatalf("%d driver frees while the owner stream's work was queued", n)
				}
				open()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			} else {
				// Expandable: the release runs under the allocator's lock
				// and never waits: a busy stream's pages are skipped.
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if n := released(sd); n != 0 {
					t.Fatalf("%d unmaps while the owner stream's work was queued", n)
				}
				open()
				if err := s.Synchronize(); err != nil {
					t.Fatal(err)
				}
				// s is idle now: the next grow on other takes its pages.
				x := mustAlloc(t, a, 80*mib, other)
				mustFree(t, a, x)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatalf("the owner stream's memset failed (memory released under it?): %v", err)
			}
			if st := a.Stats(); st.NumGrowReleases != 1 || released(sd) != 1 {
				t.Fatalf("%d releases, %d driver frees or unmaps; want 1, 1", st.NumGrowReleases, released(sd))
			}
		})
	}
}

// TestReleaseBeforeGrowExpandable checks release-before-growing with
// expandable segments: a stream about to map pages first unmaps free pages
// that other streams' large-pool ranges hold; its own free pages, and the
// small pool's, stay mapped.
func TestReleaseBeforeGrowExpandable(t *testing.T) {
	for _, tc := range []struct {
		conf     string
		released int64
		reserved int64 // MiB
	}{
		// Their 64 MiB unmapped, my older free 20 MiB kept: 2 (their
		// small page) + 20 + 20 (mine, one live, one free) + 64.
		{"expandable_segments:true", 1, 2 + 40 + 64},
		{"expandable_segments:true,release_before_grow:false", 0, 2 + 40 + 64 + 64},
	} {
		t.Run(tc.conf, func(t *testing.T) {
			dev, sd := drivertest.OpenDevice(t, "sim", "capacity=1GiB")
			a := newAlloc(t, dev, tc.conf)
			ss := streams(t, dev, 2)
			mine, theirs := ss[0], ss[1]
			big := mustAlloc(t, a, 64*mib, theirs)        // their large range: 64 MiB
			mustFree(t, a, mustAlloc(t, a, 1000, theirs)) // their small range: a free page
			first := mustAlloc(t, a, 20*mib, mine)        // my range: 20 MiB ...
			live := mustAlloc(t, a, 20*mib, mine)         // ... and 20 more, kept live
			mustFree(t, a, first)                         // the oldest free pages: mine, before a live block
			mustFree(t, a, big)                           // then theirs
			x := mustAlloc(t, a, 64*mib, mine)            // maps 64 MiB after the live block
			st := a.Stats()
			if st.NumGrowReleases != tc.released || st.ReservedBytes.All().Current != tc.reserved*mib {
				t.Errorf("released %d, reserved %d MiB; want %d, %d MiB", st.NumGrowReleases, st.ReservedBytes.All().Current/mib, tc.released, tc.reserved)
			}
			if got := int64(sd.Stats().MemUnmaps); got != tc.released {
				t.Errorf("%d unmaps, want %d", got, tc.released)
			}
			if st.Segment.Small().Current != 1 || st.ReservedBytes.Small().Current != 2*mib {
				t.Errorf("small pool: %d ranges, %d bytes reserved; want its page kept", st.Segment.Small().Current, st.ReservedBytes.Small().Current)
			}
			mustFree(t, a, x)
			mustFree(t, a, live)
			checkIndexes(t, a)
			consistent(t, a.Snapshot())
		})
	}
}

// memsetBehindGate queues a memset of the n bytes at p on s behind a closed
// gate, and returns the gate's opener (also called at cleanup).
func memsetBehindGate(t *testing.T, sd *sim.Device, s driver.Stream, p driver.Ptr, n uint64) (open func()) {
	t.Helper()
	open, err := sd.Gate(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open)
	if err := s.Device().Memset(p, 7, n, s); err != nil {
		t.Fatal(err)
	}
	return open
}

func hasBlockState(snap *memsnap.Snapshot, addr uint64, state string) bool {
	for _, seg := range snap.Segments {
		for _, b := range seg.Blocks {
			if b.Address == addr && b.State == state {
				return true
			}
		}
	}
	return false
}

// TestReleaseBeforeGrowExpandableOnlyWhatLowersThePeak checks what
// release-before-growing leaves mapped with expandable segments (issue
// 41): it unmaps only the part of a grow that would take reserved memory
// past its high-water mark, never the stream's own large-pool pages for
// its small pool, and nothing when the grow stays under the mark.
func TestReleaseBeforeGrowExpandableOnlyWhatLowersThePeak(t *testing.T) {
	const conf = "expandable_segments:true"
	unmapped := func(sd *sim.Device) uint64 { return sd.Stats().MemUnmaps }
	check := func(t *testing.T, a *Allocator, sd *sim.Device, unmaps uint64, reserved int64) {
		t.Helper()
		if got := a.Stats().ReservedBytes.All().Current; unmapped(sd) != unmaps || got != reserved*mib {
			t.Errorf("%d unmaps, %d MiB reserved; want %d, %d MiB", unmapped(sd), got/mib, unmaps, reserved)
		}
		checkIndexes(t, a)
		consistent(t, a.Snapshot())
	}
	t.Run("only the pages past the peak", func(t *testing.T) {
		dev, sd := drivertest.OpenDevice(t, "sim", "capacity=1GiB")
		a := newAlloc(t, dev, conf)
		ss := streams(t, dev, 2)
		mustFree(t, a, mustAlloc(t, a, 64*mib, ss[0])) // 64 MiB mapped, free: the peak
		x := mustAlloc(t, a, 4*mib, ss[1])             // 4 MiB past it: 4 of the 64 go
		check(t, a, sd, 1, 64)
		y := mustAlloc(t, a, 60*mib, ss[0]) // the 60 left are still mapped: a hit
		check(t, a, sd, 1, 64)
		mustFree(t, a, x)
		mustFree(t, a, y)
	})
	t.Run("nothing under the peak", func(t *testing.T) {
		dev, sd := drivertest.OpenDevice(t, "sim", "capacity=1GiB")
		a := newAlloc(t, dev, conf)
		ss := streams(t, dev, 3)
		live := mustAlloc(t, a, 64*mib, ss[0])
		mustFree(t, a, mustAlloc(t, a, 96*mib, ss[1])) // the peak: 160 MiB
		if err := a.EmptyCache(); err != nil {         // 64 MiB reserved
			t.Fatal(err)
		}
		before := unmapped(sd)
		mustFree(t, a, mustAlloc(t, a, 32*mib, ss[1])) // 96 MiB, 32 of them free
		x := mustAlloc(t, a, 40*mib, ss[2])            // 136 MiB: under the peak
		check(t, a, sd, before, 64+32+40)
		mustFree(t, a, x)
		mustFree(t, a, live)
	})
	t.Run("not the stream's own large pages for its small pool", func(t *testing.T) {
		dev, sd := drivertest.OpenDevice(t, "sim", "capacity=1GiB")
		a := newAlloc(t, dev, conf)
		s := dev.DefaultStream()
		mustFree(t, a, mustAlloc(t, a, 64*mib, s)) // large pool: 64 MiB free
		x := mustAlloc(t, a, 1000, s)              // small pool: a 2 MiB page past the peak
		check(t, a, sd, 0, 64+2)
		y := mustAlloc(t, a, 64*mib, s) // a hit: nothing mapped again
		if st := a.Stats(); st.NumDeviceAlloc != 32+1 {
			t.Errorf("%d pages mapped, want 33", st.NumDeviceAlloc)
		}
		mustFree(t, a, x)
		mustFree(t, a, y)
	})
}
