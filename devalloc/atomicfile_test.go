package devalloc

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/atomicfile"
	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// dirNames lists dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// snapshotAlloc returns an allocator whose snapshot is a few KiB of JSON.
func snapshotAlloc(t *testing.T) *Allocator {
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	a := newAlloc(t, dev, "history_entries:200")
	for i := range 40 {
		p := mustAlloc(t, a, uint64(1000+i*512), dev.DefaultStream())
		if i%2 == 0 {
			mustFree(t, a, p)
		}
	}
	return a
}

// TestWriteSnapshotFailureLeavesOld checks that a snapshot failing to
// take its place (a directory there) leaves the destination as it was and
// no temporary file (TestWriteSnapshotFileTooLarge fails the write
// itself), and that a file replaced keeps its permissions.
func TestWriteSnapshotFailureLeavesOld(t *testing.T) {
	a := snapshotAlloc(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "snap.json")
	if err := os.WriteFile(path, []byte("old snapshot"), 0o640); err != nil {
		t.Fatal(err)
	}
	// The rename fails: a non-empty directory is in the way.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteSnapshot(blocked); err == nil {
		t.Fatal("WriteSnapshot over a non-empty directory succeeded")
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"blocked", "snap.json"}) {
		t.Errorf("directory holds %q after the failed rename", names)
	}

	// And a good write replaces the file, keeping its permissions.
	if err := a.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := memsnap.Read(f); err != nil {
		t.Errorf("written snapshot: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("replaced file has mode %v, want the old 0640", fi.Mode().Perm())
	}
}

// TestWriteSnapshotRefusesSymlink: a symlink at the destination is the
// user's: it is neither written through nor replaced, and the error names
// it (atomicfile's policy; before, the link was replaced by the snapshot).
func TestWriteSnapshotRefusesSymlink(t *testing.T) {
	a := snapshotAlloc(t)
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(target, []byte("not yours"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "snap.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	err := a.WriteSnapshot(path)
	if !errors.Is(err, atomicfile.ErrNotRegular) || !strings.Contains(err.Error(), "snap.json") {
		t.Fatalf("WriteSnapshot over a symlink = %v, want atomicfile.ErrNotRegular naming the path", err)
	}
	if got, _ := os.ReadFile(target); string(got) != "not yours" {
		t.Errorf("the symlink's target was written: %.40q", got)
	}
	if got, err := os.Readlink(path); err != nil || got != target {
		t.Errorf("the symlink is now %q, %v; want it untouched", got, err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"snap.json"}) {
		t.Errorf("directory holds %q, want only the link", names)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
