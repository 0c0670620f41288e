package devalloc

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver/drivertest"
)

// failAfter fails every write once n bytes have gone through.
type failAfter struct {
	w io.Writer
	n int
}

var errInjected = errors.New("injected write failure")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n, _ := f.w.Write(p[:f.n])
		f.n -= n
		return n, errInjected
	}
	f.n -= len(p)
	return f.w.Write(p)
}

// dirNames lists dir, to spot a temporary file left behind.
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

// TestWriteSnapshotFailureLeavesOld checks that a snapshot write failing
// partway (the seam), or failing to take its place (a directory there),
// leaves the destination as it was and no temporary file.
func TestWriteSnapshotFailureLeavesOld(t *testing.T) {
	a := snapshotAlloc(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "snap.json")
	if err := os.WriteFile(path, []byte("old snapshot"), 0o640); err != nil {
		t.Fatal(err)
	}
	defer func(w func(io.Writer) io.Writer) { wrapWriter = w }(wrapWriter)
	wrapWriter = func(w io.Writer) io.Writer { return &failAfter{w: w, n: 1000} }
	err := a.WriteSnapshot(path)
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "devalloc: write snapshot") {
		t.Fatalf("WriteSnapshot with a failing write: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old snapshot" {
		t.Errorf("destination changed to %.40q", got)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"snap.json"}) {
		t.Errorf("directory holds %q after the failure, want only snap.json", names)
	}

	// The rename fails: a non-empty directory is in the way.
	wrapWriter = func(w io.Writer) io.Writer { return w }
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
	if _, err := ReadSnapshot(f); err != nil {
		t.Errorf("written snapshot: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("replaced file has mode %v, want the old 0640", fi.Mode().Perm())
	}
}

// TestWriteSnapshotReplacesSymlink checks that a symlink at the
// destination is replaced by the snapshot, and what it pointed to is not
// written through.
func TestWriteSnapshotReplacesSymlink(t *testing.T) {
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
	if err := a.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(target); string(got) != "not yours" {
		t.Errorf("the symlink's target was written: %.40q", got)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("destination: %v, %v; want a regular 0600 file", fi.Mode(), err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
