package devalloc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// TestOOMErrorCarries: the OOMError and the snapshot carry peak reserved,
// segments, cache hits and misses, the driver's memory and the VMM state.
func TestOOMErrorCarries(t *testing.T) {
	for _, tc := range []struct {
		name, dsn, conf       string
		asked, avail, inUse   bool
		wantSegments, reserve int64
	}{
		{"plain", "capacity=64MiB", "", false, true, false, 2, 40 * mib},
		{"expandable", "capacity=64MiB", "expandable_segments:true", true, true, true, 1, 40 * mib},
		{"expandable without VMM", "capacity=64MiB,vmm=false", "expandable_segments:true", true, false, false, 2, 40 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, _ := drivertest.OpenDevice(t, "sim", tc.dsn)
			s := dev.DefaultStream()
			a := newAlloc(t, dev, tc.conf)
			p := mustAlloc(t, a, 20*mib, s)
			q := mustAlloc(t, a, 20*mib, s)
			mustFree(t, a, mustAlloc(t, a, 512, s)) // a small segment (plain) and a hit below
			mustFree(t, a, mustAlloc(t, a, 512, s))
			_, err := a.Alloc(30*mib, s)
			var oe *OOMError
			if !errors.As(err, &oe) {
				t.Fatalf("want *OOMError, got %v", err)
			}
			free, total, _ := dev.MemInfo()
			if oe.DeviceTotal != total || oe.DeviceFree > total || oe.DeviceTotal != 64*mib {
				t.Errorf("device memory %d free of %d, driver says %d of %d", oe.DeviceFree, oe.DeviceTotal, free, total)
			}
			if oe.Segments != tc.wantSegments || int64(oe.PeakReserved) < tc.reserve || oe.PeakReserved < oe.Reserved {
				t.Errorf("segments %d peak reserved %d (reserved %d), want %d segments and a peak >= %d",
					oe.Segments, oe.PeakReserved, oe.Reserved, tc.wantSegments, tc.reserve)
			}
			if oe.CacheHits != 1 || oe.CacheMisses != 4 {
				t.Errorf("cache hits %d misses %d, want 1 and 4 (three grows and this OOM)", oe.CacheHits, oe.CacheMisses)
			}
			if oe.ExpandableRequested != tc.asked || oe.VMMAvailable != tc.avail || oe.ExpandableInUse != tc.inUse {
				t.Errorf("VMM: requested %v available %v in use %v, want %v %v %v",
					oe.ExpandableRequested, oe.VMMAvailable, oe.ExpandableInUse, tc.asked, tc.avail, tc.inUse)
			}
			for _, w := range []string{"peak reserved", "segments", "cache hits 1, misses 4",
				"expandable segments requested " + yesNo(tc.asked) + ", device VMM " + yesNo(tc.avail) + ", in use " + yesNo(tc.inUse)} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q: %s", w, err)
				}
			}
			st := a.Stats()
			if st.NumCacheHits != oe.CacheHits || st.NumCacheMisses != oe.CacheMisses {
				t.Errorf("Stats hits %d misses %d after the OOM returned, the error said %d %d",
					st.NumCacheHits, st.NumCacheMisses, oe.CacheHits, oe.CacheMisses)
			}
			snap := a.Snapshot()
			d := snap.Device
			if d.TotalMemory != total || d.ExpandableRequested != tc.asked || d.VMMAvailable != tc.avail || d.ExpandableInUse != tc.inUse ||
				(d.VMMGranularity != 0) != tc.avail {
				t.Errorf("snapshot device_info %+v", d)
			}
			if snap.Stats["num_cache_misses"] != 4 || snap.Stats["reserved_bytes.all.peak"] != int64(oe.PeakReserved) {
				t.Errorf("snapshot stats: misses %d peak reserved %d", snap.Stats["num_cache_misses"], snap.Stats["reserved_bytes.all.peak"])
			}
			mustFree(t, a, p)
			mustFree(t, a, q)
		})
	}
}

func TestOOMWriter(t *testing.T) {
	var stderr bytes.Buffer
	for _, tc := range []struct {
		val  string
		want io.Writer
		err  bool
	}{
		{"", nil, false}, {"0", nil, false}, {"false", nil, false}, {"1", &stderr, false}, {"true", &stderr, false},
		{"TRUE", &stderr, false}, {"yes", nil, true}, {"2", nil, true},
	} {
		w, err := oomWriter(func(k string) string {
			if k != EnvOOMVerbose {
				t.Fatalf("read %s", k)
			}
			return tc.val
		}, &stderr)
		if (err != nil) != tc.err || w != tc.want {
			t.Errorf("%s=%q: %v, %v", EnvOOMVerbose, tc.val, w, err)
		}
		if err != nil && (!errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), EnvOOMVerbose)) {
			t.Errorf("%s=%q: error %v does not name the variable", EnvOOMVerbose, tc.val, err)
		}
	}
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	t.Setenv(EnvOOMVerbose, "maybe")
	if _, err := New(dev, Config{}); err == nil || !strings.Contains(err.Error(), EnvOOMVerbose) {
		t.Errorf("New with %s=maybe: %v, want an error naming it", EnvOOMVerbose, err)
	}
	t.Setenv(EnvOOMVerbose, "1")
	a, err := New(dev, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.oomOut == nil {
		t.Errorf("New with %s=1 prints no OOM diagnostic", EnvOOMVerbose)
	}
}

// TestOOMVerbosePrints: with the switch on, each OOM writes the error and
// the memory summary; with it off, nothing.
func TestOOMVerbosePrints(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	s := dev.DefaultStream()
	a := newAlloc(t, dev, "")
	var out bytes.Buffer
	a.oomOut = &out
	p := mustAlloc(t, a, 40*mib, s)
	_, err := a.Alloc(40*mib, s)
	if !IsOOM(err) {
		t.Fatalf("want OOM, got %v", err)
	}
	got := out.String()
	if !strings.HasPrefix(got, err.Error()+"\n") {
		t.Errorf("diagnostic does not start with the error:\n%s", got)
	}
	for _, w := range []string{"devalloc memory summary, device 0", "Allocated memory", "from large pool", "40 MiB",
		"device memory: 64.00 MiB total", "segments: 1; largest free block", "cache hits: 0; misses: 2",
		"expandable segments requested: no; device VMM: yes; in use: no", "OOMs: 1"} {
		if !strings.Contains(got, w) {
			t.Errorf("diagnostic lacks %q:\n%s", w, got)
		}
	}
	mustFree(t, a, p)
	a.oomOut = nil
	out.Reset()
	if _, err := a.Alloc(100*mib, s); !IsOOM(err) {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("switch off, yet printed %q", out.String())
	}
}

func TestMemorySummary(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	s := dev.DefaultStream()
	a := newAlloc(t, dev, "max_split_size_mb:64")
	p := mustAlloc(t, a, 1000, s)
	q := mustAlloc(t, a, 100*mib, s)
	sum := a.MemorySummary()
	lines := strings.Split(strings.TrimSuffix(sum, "\n"), "\n")
	for _, l := range lines {
		if len(l) != summaryWidth+2 {
			t.Errorf("line of %d characters, want %d: %q", len(l), summaryWidth+2, l)
		}
	}
	row := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "| "+prefix) {
				return l
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, sum)
		return ""
	}
	for prefix, want := range map[string]string{
		"Allocated memory":      "|    100 MiB |    100 MiB |    100 MiB |        0 B |", // 102401 KiB, in whole MiB
		"Allocations":           "|          2 |          2 |          2 |          0 |",
		"Oversize allocations":  "|          1 |          1 |          1 |          0 |",
		"Reserved segments":     "|          2 |          2 |          2 |          0 |",
		"Requested memory":      "|    100 MiB |    100 MiB |    100 MiB |        0 B |",
		"Non-releasable memory": "|   2047 KiB |   2047 KiB |   2047 KiB |        0 B |",
	} {
		if r := row(prefix); !strings.HasSuffix(r, want) {
			t.Errorf("row %q = %q, want it to end %q", prefix, r, want)
		}
	}
	mustFree(t, a, p)
	mustFree(t, a, q)
	for in, want := range map[int64]string{0: "0 B", 2047: "2047 B", 2048: "2 KiB", 5 << 30: "5 GiB", 2047 << 20: "2047 MiB", -4096: "-4 KiB"} {
		if got := summaryBytes(in); got != want {
			t.Errorf("summaryBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestOOMAdvice: the advice names what stands in the way. A request
// larger than the device or the limit cannot be cured by freeing, and
// memory held outside the allocator is not its live allocations.
func TestOOMAdvice(t *testing.T) {
	for _, tc := range []struct {
		name, dsn, conf string
		limit           uint64
		before, outside uint64 // allocated first on this allocator, and on another one
		size            uint64
		want            []string
		notWant         string
	}{
		{name: "larger than the device", dsn: "capacity=1GiB", size: 4 << 30,
			want: []string{"the request of 4.00 GiB exceeds the device's total memory of 1.00 GiB", "split it"}, notWant: "live allocations"},
		{name: "larger than the device, expandable", dsn: "capacity=1GiB", conf: "expandable_segments:true", size: 4 << 30,
			want: []string{"exceeds the device's total memory of 1.00 GiB"}, notWant: "live allocations"},
		{name: "larger than the device, passthrough", dsn: "capacity=1GiB", conf: "backend:passthrough", size: 4 << 30,
			want: []string{"the request of 4.00 GiB exceeds the device's total memory of 1.00 GiB"}, notWant: "live allocations"},
		{name: "larger than the limit", dsn: "capacity=1GiB", limit: 256 * mib, size: 512 * mib,
			want: []string{"the request of 512.00 MiB exceeds the allocator limit of 256.00 MiB by itself", "SetLimit"}, notWant: "live allocations"},
		{name: "larger than the memory fraction", dsn: "capacity=1GiB", conf: "per_process_memory_fraction:0.25", size: 512 * mib,
			want: []string{"exceeds the allocator limit of 256.00 MiB", "per_process_memory_fraction"}, notWant: "live allocations"},
		// 9 MiB takes a 20 MiB segment: the limit refused it though 2 MiB
		// reserved plus 9 MiB is under the limit.
		{name: "segment over the limit", dsn: "capacity=1GiB", limit: 20 * mib, before: 1000, size: 9 * mib,
			want: []string{"the allocator limit (20.00 MiB) refused the new segment"}},
		{name: "used outside the allocator", dsn: "capacity=64MiB", outside: 48 * mib, size: 32 * mib,
			want: []string{"48.00 MiB of the device's 64.00 MiB is used outside this allocator"}, notWant: "live allocations"},
		{name: "used outside, passthrough", dsn: "capacity=64MiB", conf: "backend:passthrough", outside: 48 * mib, size: 32 * mib,
			want: []string{"48.00 MiB of the device's 64.00 MiB is used outside this allocator"}, notWant: "live allocations"},
		{name: "live allocations", dsn: "capacity=64MiB", before: 48 * mib, size: 32 * mib,
			want: []string{"live allocations use the memory (48.00 MiB of the device's 64.00 MiB): free some"}, notWant: "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev, _ := drivertest.OpenDevice(t, "sim", tc.dsn)
			s := dev.DefaultStream()
			if tc.outside != 0 {
				other := newAlloc(t, dev, "")
				p := mustAlloc(t, other, tc.outside, s)
				t.Cleanup(func() { mustFree(t, other, p) })
			}
			r := newResource(t, dev, tc.conf)
			if tc.limit != 0 {
				r.(*Allocator).SetLimit(tc.limit)
			}
			if tc.before != 0 {
				p := mustAlloc(t, r, tc.before, s)
				t.Cleanup(func() { mustFree(t, r, p) })
			}
			_, err := r.Alloc(tc.size, s)
			var oe *OOMError
			if !errors.As(err, &oe) {
				t.Fatalf("want *OOMError, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(oe.Advice, w) {
					t.Errorf("advice lacks %q: %s", w, oe.Advice)
				}
			}
			if tc.notWant != "" && strings.Contains(oe.Advice, tc.notWant) {
				t.Errorf("advice says %q: %s", tc.notWant, oe.Advice)
			}
			if !strings.HasSuffix(err.Error(), oe.Advice) {
				t.Errorf("message does not end with the advice: %s", err)
			}
		})
	}
}
