package devalloc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/devalloc/internal/pickletest"
	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// TestWriteSnapshotPicklePython writes a live allocator's snapshot with
// WriteSnapshot and has Python's pickle load the .pickle beside the JSON
// and check it against PyTorch's schema and the JSON.
func TestWriteSnapshotPicklePython(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	ss := streams(t, dev, 2)
	a := newAlloc(t, dev, "history_entries:256,history_stacks:true,max_split_size_mb:32,garbage_collection_threshold:0.9")
	p := mustAlloc(t, a, 4*kib, ss[0])
	q := mustAlloc(t, a, 3*mib, ss[0])
	r := mustAlloc(t, a, 700, ss[1])
	// The OOM path waits for pending frees: the OOM before the gate.
	if _, err := a.Alloc(200*mib, ss[0]); !IsOOM(err) {
		t.Fatalf("want OOM, got %v", err)
	}
	if err := a.RecordStream(q, ss[1]); err != nil {
		t.Fatal(err)
	}
	open := gate(t, dev, ss[1])
	mustFree(t, a, q) // pending until the gate opens
	dir := t.TempDir()
	path := filepath.Join(dir, "snap.json")
	if err := a.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	open()
	mustFree(t, a, p)
	mustFree(t, a, r)
	pp := filepath.Join(dir, "snap.pickle")
	if memsnap.PicklePath(path) != pp {
		t.Fatalf("memsnap.PicklePath(%q) = %q, want %q", path, memsnap.PicklePath(path), pp)
	}
	data, err := os.ReadFile(pp)
	if err != nil {
		t.Fatalf("no pickle beside the JSON: %v", err)
	}
	// The Go side too: the live snapshot has stacks on blocks, a pending
	// block and an oom entry, so every shape rule is exercised.
	got, err := pickletest.Unpickle(data)
	if err != nil {
		t.Fatal(err)
	}
	top := pickletest.DerefLists(got).(map[string]any)
	var oom, blockFrames bool
	for _, e := range top["device_traces"].([]any)[0].([]any) {
		if m := e.(map[string]any); m["action"] == memsnap.ActionOOM {
			_, hasAddr := m["addr"]
			oom = !hasAddr && m["device_free"].(int64) > 0
		}
	}
	for _, s := range top["segments"].([]any) {
		for _, b := range s.(map[string]any)["blocks"].([]any) {
			if bm := b.(map[string]any); bm["state"] != memsnap.StateInactive && len(bm["frames"].([]any)) > 0 {
				blockFrames = true
			}
		}
	}
	if !oom || !blockFrames {
		t.Errorf("pickle lacks an oom entry with device_free (%v) or block frames (%v)", oom, blockFrames)
	}
	if exact := pickletest.RunPython(t, true, pp, path); exact != 1 {
		t.Errorf("Python's pickler did not reproduce the live snapshot's pickle byte for byte")
	}
}

func TestWriteSnapshotRefusesPicklePath(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, "")
	path := filepath.Join(t.TempDir(), "snap.pickle")
	err := a.WriteSnapshot(path)
	if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "snap.pickle") {
		t.Fatalf("WriteSnapshot(%q) = %v, want an error naming it", path, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a file was written at %s", path)
	}
}
