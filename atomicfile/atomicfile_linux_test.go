package atomicfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestFileTooLarge fails a write for real: a child process with
// RLIMIT_FSIZE below the content's size gets EFBIG. The old file stays and
// no temporary file is left.
func TestFileTooLarge(t *testing.T) {
	if path := os.Getenv("ATOMICFILE_EFBIG_CHILD"); path != "" {
		lim := syscall.Rlimit{Cur: 4096, Max: 4096}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			t.Fatal(err)
		}
		err := WriteFile(path, 0o600, content(strings.Repeat("x", 100<<10)))
		os.Stdout.WriteString("child-error: " + strings.ReplaceAll(errString(err), "\n", " ") + "\n")
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileTooLarge$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ATOMICFILE_EFBIG_CHILD="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child-error:") || !strings.Contains(string(out), "file too large") {
		t.Fatalf("the child's write did not fail with EFBIG:\n%s", out)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("destination changed to %.20q", got)
	}
	if n := names(t, dir); !slices.Equal(n, []string{"out.json"}) {
		t.Errorf("directory holds %q after the failure, want only out.json", n)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
