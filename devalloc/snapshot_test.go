package devalloc

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

func TestStatsMap(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	s := dev.DefaultStream()
	a := newAlloc(t, dev, "")
	p := mustAlloc(t, a, 1000, s)  // small: 1024
	q := mustAlloc(t, a, 3*mib, s) // large: 20 MiB segment
	m := a.Stats().Map()
	for k, want := range map[string]int64{
		"allocation.all.current":            2,
		"allocation.small_pool.current":     1,
		"allocation.large_pool.current":     1,
		"allocated_bytes.all.current":       1024 + 3*mib,
		"allocated_bytes.small_pool.peak":   1024,
		"requested_bytes.all.current":       1000 + 3*mib,
		"reserved_bytes.all.current":        22 * mib,
		"segment.all.current":               2,
		"active_bytes.large_pool.current":   3 * mib,
		"inactive_split.all.current":        2,
		"inactive_split_bytes.all.current":  (2*mib - 1024) + 17*mib,
		"num_device_alloc":                  2,
		"num_alloc_retries":                 0,
		"num_ooms":                          0,
		"num_sync_all_streams":              0,
		"oversize_allocations.current":      0,
		"num_cross_stream_reuse":            0,
		"allocation.all.allocated":          2,
		"allocated_bytes.large_pool.freed":  0,
		"reserved_bytes.large_pool.current": 20 * mib,
		"num_cache_hits":                    0, // both grew a pool
		"num_cache_misses":                  2,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %d (present %v), want %d", k, got, ok, want)
		}
	}
	if n := len(m); n != 9*3*4+2*4+10 {
		t.Errorf("Map has %d keys, want %d", n, 9*3*4+2*4+10)
	}
	mustFree(t, a, q)
	a.ResetPeakStats()
	st := a.Stats()
	if st.AllocatedBytes.All().Peak != 1024 || st.AllocatedBytes.All().Freed != 3*mib {
		t.Errorf("after reset: peak %d freed %d, want 1024 and 3 MiB", st.AllocatedBytes.All().Peak, st.AllocatedBytes.All().Freed)
	}
	tf := a.TFStats()
	if tf.NumAllocs != 2 || tf.BytesInUse != 1024 || tf.PeakBytesInUse != 1024 || tf.LargestAllocSize != 3*mib ||
		tf.BytesReserved != 22*mib || tf.PeakBytesReserved != 22*mib || tf.LargestFreeBlockBytes != 20*mib || tf.BytesLimit != 8<<30 {
		t.Errorf("TFStats = %+v", tf)
	}
	mustFree(t, a, p)
	if keys := a.Stats().MapKeys(); !slices.IsSorted(keys) || len(keys) != len(m) {
		t.Errorf("MapKeys not sorted or wrong length")
	}
}

func TestSnapshotSchemaAndHistory(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	ss := streams(t, dev, 2)
	a := newAlloc(t, dev, "history_entries:64,history_stacks:true,expandable_segments:true")
	p := mustAlloc(t, a, 4*kib, ss[0])
	q := mustAlloc(t, a, 3*mib, ss[0])
	if err := a.RecordStream(q, ss[1]); err != nil {
		t.Fatal(err)
	}
	open := gate(t, dev, ss[1])
	mustFree(t, a, q) // pending until the gate opens
	snap := a.Snapshot()
	consistent(t, snap)
	states := map[string]int{}
	for _, seg := range snap.Segments {
		if !seg.IsExpandable || seg.Stream != ss[0].ID() || seg.Device != 0 {
			t.Errorf("segment %+v: want expandable on stream %d, device 0", seg, ss[0].ID())
		}
		for _, b := range seg.Blocks {
			states[b.State]++
		}
	}
	if states[memsnap.StateActiveAllocated] != 1 || states[memsnap.StateActivePendingFree] != 1 {
		t.Errorf("block states %v, want one allocated and one pending free", states)
	}
	open()
	// The OOM path waits for pending frees: only after the gate opens.
	if _, err := a.Alloc(200*mib, ss[0]); !IsOOM(err) {
		t.Fatalf("want OOM, got %v", err)
	}
	snap = a.Snapshot()
	var actions []string
	for _, e := range snap.DeviceTraces[0] {
		if !slices.Contains(actions, e.Action) {
			actions = append(actions, e.Action)
		}
		if e.TimeUS == 0 || len(e.Frames) == 0 {
			t.Errorf("trace entry %+v lacks time or frames", e)
		}
	}
	for _, want := range []string{memsnap.ActionSegmentMap, memsnap.ActionAlloc, memsnap.ActionFreeRequested, memsnap.ActionOOM} {
		if !slices.Contains(actions, want) {
			t.Errorf("trace lacks %q: %v", want, actions)
		}
	}
	mustFree(t, a, p)
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.Snapshot().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"segments", "device_traces", "stats"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	back, err := memsnap.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := back.DeviceTraces[0]
	got := map[string]bool{}
	for _, e := range tr {
		got[e.Action] = true
	}
	for _, want := range []string{memsnap.ActionFreeCompleted, memsnap.ActionSegmentUnmap} {
		if !got[want] {
			t.Errorf("decoded trace lacks %q", want)
		}
	}
}

func TestHistoryRing(t *testing.T) {
	h := newHistory()
	h.resizeLocked(3)
	h.mode.Store(modeTrace)
	for i := range 5 {
		h.add(actSegmentAlloc, driver.Ptr(i+1), 1, 0)
	}
	h.mu.Lock()
	es := traceEntries(h.rawLocked())
	h.mu.Unlock()
	if len(es) != 3 || es[0].Addr != 3 || es[2].Addr != 5 {
		t.Errorf("ring = %+v, want the last three, oldest first", es)
	}
}

func TestSnapshotOnOOM(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	path := filepath.Join(t.TempDir(), "oom.json")
	a := newAlloc(t, dev, "snapshot_on_oom:"+path)
	p := mustAlloc(t, a, 40*mib, dev.DefaultStream())
	if _, err := a.Alloc(40*mib, dev.DefaultStream()); !IsOOM(err) {
		t.Fatalf("want OOM, got %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no snapshot written on OOM: %v", err)
	}
	defer f.Close()
	snap, err := memsnap.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Segments) != 1 || snap.Stats["num_ooms"] != 1 {
		t.Errorf("OOM snapshot: %d segments, num_ooms %d", len(snap.Segments), snap.Stats["num_ooms"])
	}
	mustFree(t, a, p)
}
