package devalloc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestWriteSnapshotFileTooLarge makes the write fail for real: a child
// process with RLIMIT_FSIZE below the snapshot's size gets EFBIG. The old
// snapshot stays and no temporary file is left.
func TestWriteSnapshotFileTooLarge(t *testing.T) {
	if path := os.Getenv("DEVALLOC_EFBIG_CHILD"); path != "" {
		a := snapshotAlloc(t)
		lim := syscall.Rlimit{Cur: 2048, Max: 2048}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			t.Fatal(err)
		}
		err := a.WriteSnapshot(path)
		os.Stdout.WriteString("child-error: " + strconv.Quote(errString(err)) + "\n")
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "snap.json")
	if err := os.WriteFile(path, []byte("old snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteSnapshotFileTooLarge$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DEVALLOC_EFBIG_CHILD="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child-error:") || !strings.Contains(string(out), "file too large") {
		t.Fatalf("the child's write did not fail with EFBIG:\n%s", out)
	}
	if got, _ := os.ReadFile(path); string(got) != "old snapshot" {
		t.Errorf("destination changed to %.40q", got)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"snap.json"}) {
		t.Errorf("directory holds %q after the failure, want only snap.json", names)
	}
}
