package accbench

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestOutputsFileTooLarge makes the output writes fail for real: a child
// process with RLIMIT_FSIZE below results.json's size gets EFBIG. The run
// exits 1, and the previous results.json and report.html are intact.
func TestOutputsFileTooLarge(t *testing.T) {
	if dir := os.Getenv("ACCBENCH_EFBIG_CHILD"); dir != "" {
		lim := syscall.Rlimit{Cur: 4096, Max: 4096}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"-driver", "sim", "-out", dir}, &stdout, &stderr, Extra{}, []Suite{bigSuite()})
		os.Stdout.WriteString("child-exit: " + string(rune('0'+code)) + "\nchild-stderr: " + stderr.String())
		return
	}
	dir := t.TempDir()
	oldOutputs(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutputsFileTooLarge$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ACCBENCH_EFBIG_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child-exit: 1") || !strings.Contains(string(out), "file too large") {
		t.Fatalf("the child's run did not fail with EFBIG:\n%s", out)
	}
	checkOldOutputs(t, dir)
}
