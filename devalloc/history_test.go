package devalloc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// trace returns the allocator's trace, oldest first.
func trace(a *Allocator) []memsnap.TraceEntry { return a.Snapshot().DeviceTraces[a.Device().Ordinal()] }

// blockFrames returns the frames of the block at p in a snapshot, and
// whether the block was found.
func blockFrames(a *Allocator, p driver.Ptr) ([]memsnap.Frame, bool) {
	for _, s := range a.Snapshot().Segments {
		for _, b := range s.Blocks {
			if b.Address == uint64(p) {
				return b.Frames, true
			}
		}
	}
	return nil, false
}

// fromHere reports whether fs starts at a function of this test file's
// callers (the allocator's own frames trimmed) named name.
func fromHere(fs []memsnap.Frame, name string) bool {
	return len(fs) > 0 && strings.HasSuffix(fs[0].Name, name)
}

func mustRecord(t *testing.T, a *Allocator, o HistoryOptions) {
	t.Helper()
	if err := a.RecordHistory(o); err != nil {
		t.Fatal(err)
	}
}

// TestRecordHistory switches history while the allocator is in use and
// checks each setting's _record_memory_history semantics.
func TestRecordHistory(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	s := dev.DefaultStream()
	a := newAlloc(t, dev, "")
	p := mustAlloc(t, a, 1000, s)
	if tr := trace(a); len(tr) != 0 {
		t.Fatalf("history off by default, trace %v", tr)
	}
	if fs, _ := blockFrames(a, p); fs != nil {
		t.Fatalf("block allocated with history off has frames %v", fs)
	}

	// PyTorch's default call: everything, with stacks.
	mustRecord(t, a, HistoryOptions{})
	q := mustAlloc(t, a, 1000, s)
	tr := trace(a)
	if len(tr) != 1 || tr[0].Action != memsnap.ActionAlloc || tr[0].Size != 1000 || !fromHere(tr[0].Frames, "mustAlloc") {
		t.Fatalf("after RecordHistory({}): trace %+v, want one alloc of the requested 1000 bytes from mustAlloc", tr)
	}
	if fs, _ := blockFrames(a, q); !fromHere(fs, "mustAlloc") {
		t.Errorf("live block frames %v, want the allocating stack from mustAlloc", fs)
	}
	if fs, _ := blockFrames(a, p); fs != nil {
		t.Errorf("block allocated before recording has frames %v", fs)
	}
	mustFree(t, a, q)
	tr = trace(a)
	if len(tr) != 3 || tr[1].Action != memsnap.ActionFreeRequested || tr[2].Action != memsnap.ActionFreeCompleted ||
		tr[2].Size != 1000 || !fromHere(tr[1].Frames, "mustFree") {
		t.Fatalf("after a free with context all: %+v, want free_requested and free_completed from mustFree", tr)
	}

	// context alloc: a free entry carries the block's allocating stack.
	mustRecord(t, a, HistoryOptions{Context: ContextAlloc})
	if n := len(trace(a)); n != 3 {
		t.Fatalf("re-enabling kept %d entries, want the 3 recorded (PyTorch keeps them)", n)
	}
	q = mustAlloc(t, a, 1000, s)
	mustFree(t, a, q)
	tr = trace(a)[3:]
	if len(tr) != 3 || !fromHere(tr[0].Frames, "mustAlloc") || !fromHere(tr[1].Frames, "mustAlloc") || !fromHere(tr[2].Frames, "mustAlloc") {
		t.Fatalf("context alloc: %+v, want the free entries to carry the allocating stack", tr)
	}

	// state: stacks of live blocks, no trace entries.
	mustRecord(t, a, HistoryOptions{Enabled: HistoryState, Context: ContextState})
	r := mustAlloc(t, a, 3*mib, s)
	if n := len(trace(a)); n != 6 {
		t.Errorf("state recorded trace entries: %d, want the 6 kept", n)
	}
	if fs, _ := blockFrames(a, r); !fromHere(fs, "mustAlloc") {
		t.Errorf("state: block frames %v", fs)
	}

	// context none forgets block stacks; a smaller ring keeps the newest.
	mustRecord(t, a, HistoryOptions{Context: ContextNone, MaxEntries: 2})
	if fs, _ := blockFrames(a, r); fs != nil {
		t.Errorf("context none: block keeps frames %v", fs)
	}
	tr = trace(a)
	if len(tr) != 2 || tr[0].Action != memsnap.ActionFreeRequested || tr[1].Action != memsnap.ActionFreeCompleted {
		t.Errorf("MaxEntries 2: %+v, want the newest two", tr)
	}
	for range 3 {
		q = mustAlloc(t, a, 2000, s)
		mustFree(t, a, q)
	}
	tr = trace(a)
	if len(tr) != 2 || tr[0].Action != memsnap.ActionFreeRequested || tr[1].Size != 2000 || tr[0].Frames != nil {
		t.Errorf("full ring of 2 without stacks: %+v", tr)
	}

	// ClearHistory drops the trace and keeps recording.
	mustRecord(t, a, HistoryOptions{ClearHistory: true, MaxEntries: 8})
	if n := len(trace(a)); n != 0 {
		t.Errorf("ClearHistory left %d entries", n)
	}
	q = mustAlloc(t, a, 100, s)
	if n := len(trace(a)); n != 1 {
		t.Errorf("after ClearHistory: %d entries, want 1", n)
	}

	// Off: trace cleared, nothing recorded, stacks forgotten.
	mustRecord(t, a, HistoryOptions{Enabled: HistoryOff})
	if fs, _ := blockFrames(a, q); fs != nil {
		t.Errorf("off: block keeps frames")
	}
	mustFree(t, a, q)
	mustFree(t, a, r)
	mustFree(t, a, p)
	if n := len(trace(a)); n != 0 {
		t.Errorf("off: trace has %d entries", n)
	}
}

func TestRecordHistoryInvalid(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, "history_entries:4")
	for _, tc := range []struct {
		o    HistoryOptions
		want string
	}{
		{HistoryOptions{Enabled: "yes"}, `Enabled "yes"`},
		{HistoryOptions{Context: "python"}, `Context "python"`},
		{HistoryOptions{MaxEntries: -1}, "MaxEntries -1"},
		{HistoryOptions{MaxEntries: maxHistoryEntries + 1}, "MaxEntries 16777217"},
	} {
		err := a.RecordHistory(tc.o)
		if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RecordHistory(%+v) = %v, want an error naming %s", tc.o, err, tc.want)
		}
	}
	// The options in force are unchanged: a ring of 4, no stacks.
	for range 3 {
		mustFree(t, a, mustAlloc(t, a, 512, nil))
	}
	if tr := trace(a); len(tr) != 4 || tr[0].Frames != nil {
		t.Errorf("after refused calls: %d entries (frames %v), want the config's ring of 4 without stacks", len(tr), tr[0].Frames)
	}
}

// TestHistoryConfigKeys: history_entries and history_stacks set the
// options New starts with.
func TestHistoryConfigKeys(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	for _, tc := range []struct {
		conf           string
		entries        int
		stacks, frames bool
	}{
		{"", 0, false, false},
		{"history_entries:2", 2, false, false},
		{"history_entries:2,history_stacks:true", 2, true, true},
		{"history_stacks:true", 0, false, false},
	} {
		a := newAlloc(t, dev, tc.conf)
		p := mustAlloc(t, a, 512, nil)
		mustAlloc(t, a, 512, nil)
		mustFree(t, a, p)
		tr := trace(a)
		fs, _ := blockFrames(a, p+512)
		if len(tr) != tc.entries || (tc.entries > 0 && (tr[0].Frames != nil) != tc.stacks) || (fs != nil) != tc.frames {
			t.Errorf("%q: %d entries, entry frames %v, block frames %v; want %d, %v, %v",
				tc.conf, len(tr), tc.entries > 0 && tr[0].Frames != nil, fs != nil, tc.entries, tc.stacks, tc.frames)
		}
	}
}

// TestHistoryResize: growing keeps every entry, shrinking the newest.
func TestHistoryResize(t *testing.T) {
	h := newHistory()
	h.resizeLocked(3)
	h.mode.Store(modeTrace)
	addrs := func() []uint64 {
		var out []uint64
		for _, e := range traceEntries(h.rawLocked()) {
			out = append(out, e.Addr)
		}
		return out
	}
	for i := range 5 { // wraps: 3 4 5
		h.add(actSegmentMap, driver.Ptr(i+1), 1, 0)
	}
	for _, step := range []struct {
		n    int
		add  int
		want []uint64
	}{
		{5, 0, []uint64{3, 4, 5}},
		{5, 3, []uint64{4, 5, 6, 7, 8}},
		{2, 0, []uint64{7, 8}},
		{2, 1, []uint64{8, 9}},
		{1, 0, []uint64{9}},
	} {
		h.resizeLocked(step.n)
		for range step.add {
			last := addrs()[len(addrs())-1]
			h.add(actSegmentMap, driver.Ptr(last+1), 1, 0)
		}
		if got := addrs(); !slices.Equal(got, step.want) {
			t.Fatalf("resize to %d, add %d: %v, want %v", step.n, step.add, got, step.want)
		}
	}
}

// TestRecordHistoryStress switches history while goroutines allocate,
// free and take snapshots (run with -race): every snapshot stays
// consistent, and a block's frames appear only on live blocks.
func TestRecordHistoryStress(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	ss := streams(t, dev, 3)
	a := newAlloc(t, dev, "history_entries:64")
	opts := []HistoryOptions{{}, {Enabled: HistoryOff}, {Enabled: HistoryState, Context: ContextState},
		{Context: ContextAlloc, MaxEntries: 16}, {Context: ContextNone, MaxEntries: 1}, {ClearHistory: true}}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 3 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			var held []driver.Ptr
			for i := 0; ; i++ {
				select {
				case <-stop:
					for _, p := range held {
						mustFree(t, a, p)
					}
					return
				default:
				}
				if len(held) > 8 || (len(held) > 0 && r.IntN(2) == 0) {
					k := r.IntN(len(held))
					mustFree(t, a, held[k])
					held = append(held[:k], held[k+1:]...)
					continue
				}
				held = append(held, mustAlloc(t, a, mixedSize(r, 256, 4*mib), ss[g]))
			}
		})
	}
	for i := range 200 {
		mustRecord(t, a, opts[i%len(opts)])
		if i%10 == 0 {
			snap := a.Snapshot()
			consistent(t, snap)
			for _, s := range snap.Segments {
				for _, b := range s.Blocks {
					if b.Frames != nil && b.State == memsnap.StateInactive {
						t.Fatalf("free block %#x has frames", b.Address)
					}
				}
			}
		}
	}
	close(stop)
	wg.Wait()
}

// TestHistoryTimes: trace entries carry Unix microseconds of when they
// were recorded (taken from one monotonic read past a wall-clock start),
// in recording order.
func TestHistoryTimes(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	a := newAlloc(t, dev, "history_entries:1000")
	before := time.Now().UnixMicro()
	for range 50 {
		mustFree(t, a, mustAlloc(t, a, 4096, nil))
	}
	time.Sleep(2 * time.Millisecond)
	mustFree(t, a, mustAlloc(t, a, 4096, nil))
	after := time.Now().UnixMicro()
	tr := a.Snapshot().DeviceTraces[0]
	if len(tr) < 100 {
		t.Fatalf("%d trace entries, want at least 100", len(tr))
	}
	const slack = 1000 // the wall clock and the monotonic one may drift apart a little
	for i, e := range tr {
		if e.TimeUS < before-slack || e.TimeUS > after+slack {
			t.Fatalf("entry %d at %d us, outside [%d, %d]", i, e.TimeUS, before, after)
		}
		if i > 0 && e.TimeUS < tr[i-1].TimeUS {
			t.Fatalf("entry %d at %d us, before entry %d at %d", i, e.TimeUS, i-1, tr[i-1].TimeUS)
		}
	}
	if last, prev := tr[len(tr)-1].TimeUS, tr[len(tr)-4].TimeUS; last-prev < 2000 {
		t.Errorf("entries around a 2 ms sleep %d us apart", last-prev)
	}
}

// TestHistoryRingStacks drives the ring (32-byte entries, stacks kept
// beside them from the first entry that has one) beside a plain slice of
// histEntry through fills, wraps and resizes, some entries with stacks
// and some without: rawLocked must give back exactly the newest entries,
// oldest first, each with its own stack, action, time and fields.
func TestHistoryRingStacks(t *testing.T) {
	h := newHistory()
	h.resizeLocked(7)
	h.mode.Store(modeTrace)
	var ref []histEntry
	max := 7
	for i := range 60 {
		e := histEntry{act: action(i % int(actOOM+1)), addr: driver.Ptr(i+1) << 9, size: uint64(i) * 3, stream: uint64(i % 5)}
		if i >= 4 && i%3 != 0 { // no stack at first, then some
			e.pcs = []uintptr{uintptr(i), uintptr(i + 1)}
		}
		h.append(e)
		got := h.rawLocked()
		e.t = got[len(got)-1].t
		ref = append(ref, e)
		if len(ref) > max {
			ref = ref[len(ref)-max:]
		}
		if i == 25 || i == 40 {
			max = 4 + i%5
			h.resizeLocked(max)
			if len(ref) > max {
				ref = ref[len(ref)-max:]
			}
		}
		got = h.rawLocked()
		if len(got) != len(ref) {
			t.Fatalf("step %d: %d entries, want %d", i, len(got), len(ref))
		}
		for j := range ref {
			g, w := got[j], ref[j]
			if g.act != w.act || g.addr != w.addr || g.size != w.size || g.stream != w.stream || g.t != w.t || !slices.Equal(g.pcs, w.pcs) {
				t.Fatalf("step %d: entry %d = %+v, want %+v", i, j, g, w)
			}
		}
	}
}

// TestFreeTraceFastAndSlow checks that a Free reusable at once (recorded
// as one pair, history.freePair) traces the same entries as one that
// waits for another stream (free_requested now, free_completed when the
// stream's work is over): action, address, requested size and the stream
// the block was allocated on.
func TestFreeTraceFastAndSlow(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	a := newAlloc(t, dev, "history_entries:1000")
	other, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	p := mustAlloc(t, a, 5000, nil)
	mustFree(t, a, p) // fast
	q := mustAlloc(t, a, 5000, nil)
	if q != p {
		t.Fatalf("second alloc at %v, want %v (best fit: the block just freed)", q, p)
	}
	if err := a.RecordStream(q, other); err != nil {
		t.Fatal(err)
	}
	mustFree(t, a, q) // waits for other
	if err := a.Drain(); err != nil {
		t.Fatal(err)
	}
	tr := a.Snapshot().DeviceTraces[0]
	var frees [2][]string
	n := 0
	for _, e := range tr {
		if e.Action == "free_requested" || e.Action == "free_completed" {
			if n >= 4 {
				t.Fatalf("more than 4 free entries: %+v", tr)
			}
			frees[n/2] = append(frees[n/2], fmt.Sprintf("%s %#x %d %d", e.Action, e.Addr, e.Size, e.Stream))
			n++
		}
	}
	if n != 4 || !slices.Equal(frees[0], frees[1]) {
		t.Fatalf("fast free traced %q, slow free %q", frees[0], frees[1])
	}
	if want := fmt.Sprintf("free_requested %#x 5000 %d", uint64(p), dev.DefaultStream().ID()); frees[0][0] != want {
		t.Fatalf("free traced %q, want %q first", frees[0], want)
	}
}
