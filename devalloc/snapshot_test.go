package devalloc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	if states[StateActiveAllocated] != 1 || states[StateActivePendingFree] != 1 {
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
	for _, want := range []string{ActionSegmentMap, ActionAlloc, ActionFreeRequested, ActionOOM} {
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
	back, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := back.DeviceTraces[0]
	got := map[string]bool{}
	for _, e := range tr {
		got[e.Action] = true
	}
	for _, want := range []string{ActionFreeCompleted, ActionSegmentUnmap} {
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
	snap, err := ReadSnapshot(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Segments) != 1 || snap.Stats["num_ooms"] != 1 {
		t.Errorf("OOM snapshot: %d segments, num_ooms %d", len(snap.Segments), snap.Stats["num_ooms"])
	}
	mustFree(t, a, p)
}

func FuzzReadSnapshot(f *testing.F) {
	f.Add([]byte(`{"segments":[{"device":0,"address":4096,"total_size":2097152,"blocks":[{"address":4096,"size":512,"state":"active_allocated"}]}],"device_traces":[[{"action":"alloc","addr":4096,"size":512}]]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := s.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSnapshot(&buf); err != nil {
			t.Fatalf("re-decoding our own encoding: %v", err)
		}
	})
}

// TestReadSnapshotLimit: ReadSnapshotLimit reads at most one byte past
// its limit and says which limit refused the input and how to raise it.
func TestReadSnapshotLimit(t *testing.T) {
	var buf bytes.Buffer
	s := &Snapshot{Segments: []SegmentInfo{}, DeviceTraces: [][]TraceEntry{{{Action: ActionAlloc, Addr: 4096, Size: 512}}}}
	if err := s.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	n := int64(buf.Len())
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{n, true}, {math.MaxInt64, true}, {n - 1, false}, {1, false}} {
		r := &countingReader{r: bytes.NewReader(buf.Bytes())}
		got, err := ReadSnapshotLimit(r, tc.limit)
		if tc.ok {
			if err != nil || len(got.DeviceTraces[0]) != 1 {
				t.Errorf("limit %d of a %d-byte snapshot: %v", tc.limit, n, err)
			}
			continue
		}
		if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), fmt.Sprintf("read limit of %d bytes", tc.limit)) ||
			!strings.Contains(err.Error(), "memviz -max-bytes") {
			t.Errorf("limit %d of a %d-byte snapshot: err %v, want ErrInvalidValue naming the limit and how to raise it", tc.limit, n, err)
		}
		if r.n > tc.limit+1 {
			t.Errorf("limit %d: read %d bytes", tc.limit, r.n)
		}
	}
	for _, limit := range []int64{0, -1} {
		if _, err := ReadSnapshotLimit(bytes.NewReader(buf.Bytes()), limit); !errors.Is(err, driver.ErrInvalidValue) {
			t.Errorf("limit %d: err %v, want ErrInvalidValue", limit, err)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// FuzzReadSnapshotLimit: under any limit, an input is either refused
// with the limit's error, having been read at most one byte past it, or
// decodes as ReadSnapshot decodes it.
func FuzzReadSnapshotLimit(f *testing.F) {
	good := `{"segments":[{"device":0,"address":4096,"total_size":2097152,"blocks":[{"address":4096,"size":512,"state":"active_allocated"}]}],"device_traces":[[{"action":"alloc","addr":4096,"size":512}]]}`
	f.Add([]byte(good), uint16(len(good)))
	f.Add([]byte(good), uint16(len(good)-1))
	f.Add([]byte(good+"\n"), uint16(len(good)))
	f.Add([]byte(`{"segments":[]}`+strings.Repeat(" ", 600)), uint16(20))
	f.Add([]byte(`{"segments":["`+strings.Repeat("\xff", 64)+`"]}`), uint16(40))
	f.Add([]byte(`[`), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		lim := int64(limit) + 1
		r := &countingReader{r: bytes.NewReader(data)}
		s, err := ReadSnapshotLimit(r, lim)
		if r.n > lim+1 {
			t.Fatalf("limit %d: read %d bytes", lim, r.n)
		}
		if err != nil {
			if int64(len(data)) <= lim && strings.Contains(err.Error(), "read limit") {
				t.Fatalf("a %d-byte input refused under a limit of %d: %v", len(data), lim, err)
			}
			return
		}
		want, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("decodes under limit %d but not under ReadSnapshot's: %v", lim, err)
		}
		var a, b bytes.Buffer
		if err := s.WriteJSON(&a); err != nil {
			t.Fatal(err)
		}
		if err := want.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("limit %d decodes differently:\n%s\n%s", lim, a.Bytes(), b.Bytes())
		}
	})
}
