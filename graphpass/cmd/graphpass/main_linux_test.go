package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	gd "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

// The tests here run the command in a child process, a re-run of this
// test binary: under RLIMIT_FSIZE, which would also limit the test binary,
// or on inputs that a regression would read forever, so the child has a
// heap cap and a deadline and the test fails instead of hanging or taking
// the machine's memory.

const childEnv = "GRAPHPASS_TEST_CHILD"

// childSpec is what the child runs, passed as JSON in childEnv.
type childSpec struct {
	Args          []string
	FileSizeLimit uint64 // RLIMIT_FSIZE soft limit in bytes; 0: unchanged
	MaxHeap       uint64 // exit 3 when the heap grows past this; 0: no cap
}

// childDeadline bounds a child's run; the command finishes in well under
// a second, so reaching it means the child blocked or read without end.
const childDeadline = 60 * time.Second

// TestHelperChild is not a test: it is the child's entry point.
func TestHelperChild(t *testing.T) {
	env := os.Getenv(childEnv)
	if env == "" {
		t.Skip("runs only as the child of the tests in this file")
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(env), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		os.Exit(4)
	}
	if spec.FileSizeLimit > 0 {
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
			fmt.Fprintln(os.Stderr, "getrlimit:", err)
			os.Exit(4)
		}
		// Writes past the soft limit fail with EFBIG; the Go runtime
		// ignores the SIGXFSZ that comes with them.
		rl.Cur = spec.FileSizeLimit
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil {
			fmt.Fprintln(os.Stderr, "setrlimit:", err)
			os.Exit(4)
		}
	}
	if spec.MaxHeap > 0 {
		go func() {
			s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			for {
				metrics.Read(s)
				if h := s[0].Value.Uint64(); h > spec.MaxHeap {
					fmt.Fprintf(os.Stderr, "child heap at %d bytes, over its cap of %d\n", h, spec.MaxHeap)
					os.Exit(3)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	os.Exit(run(spec.Args, os.Stdout, os.Stderr))
}

// runChild runs spec in a child and returns its exit code and output.
func runChild(t *testing.T, spec childSpec) (int, string) {
	t.Helper()
	env, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), childDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperChild$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(env))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v: child still running after %v (blocked, or reading without end); output %q", spec.Args, childDeadline, out.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode(), out.String()
	default:
		t.Fatalf("%v: child: %v; output %q", spec.Args, err, out.String())
		return 0, ""
	}
}

// TestCLIFileTooLargeKeepsInput runs -in X -out X with writes failing for
// real: RLIMIT_FSIZE below the output's size makes write(2) fail with
// EFBIG as a full disk fails with ENOSPC, with no root and no mock. Writing
// in place used to truncate the input first, leaving the limit's worth of
// it.
func TestCLIFileTooLargeKeepsInput(t *testing.T) {
	t.Setenv("ACCELKIT_DISABLE_HOST_COMPUTE_PIN", "")
	pb := gd.Model(300)
	for _, out := range []string{"model.pb", "new.pb"} {
		dir := t.TempDir()
		model := filepath.Join(dir, "model.pb")
		if err := os.WriteFile(model, pb, 0o644); err != nil {
			t.Fatal(err)
		}
		code, output := runChild(t, childSpec{
			Args:          []string{"-in", model, "-out", filepath.Join(dir, out)},
			FileSizeLimit: uint64(len(pb) / 2),
		})
		if code != 1 || !strings.Contains(output, "file too large") {
			t.Errorf("-out %s: exit %d, output %q; want 1 and EFBIG", out, code, output)
		}
		if got := mustRead(t, model); !bytes.Equal(got, pb) {
			t.Errorf("-out %s: the input is no longer byte-identical (%d bytes, was %d)", out, len(got), len(pb))
		}
		if got := dirNames(t, dir); !slices.Equal(got, []string{"model.pb"}) {
			t.Errorf("-out %s: directory holds %q, want only model.pb", out, got)
		}
	}
}

// TestCLIInputNotRegular checks that inputs that never end or never start
// are refused before they are opened: /dev/zero used to be read until the
// process ran out of memory, and a FIFO blocks open until a writer comes.
func TestCLIInputNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, msg string }{
		{"/dev/zero", "-in /dev/zero is a character device, not a regular file"},
		{fifo, "-in " + fifo + " is a named pipe (FIFO), not a regular file"},
	}
	for _, tt := range tests {
		code, output := runChild(t, childSpec{Args: []string{"-in", tt.in, "-dump"}, MaxHeap: 256 << 20})
		if code != 1 || !strings.Contains(output, tt.msg) {
			t.Errorf("-in %s: exit %d, output %q; want 1 and %q", tt.in, code, output, tt.msg)
		}
	}
}
