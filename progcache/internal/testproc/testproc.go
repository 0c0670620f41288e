// Package testproc runs the helper processes of the progcache and
// progcache/bolt tests: the test binary started again to run only
// TestHelperProcess, which does the work of the role its environment
// names and reports on its standard output.
package testproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
)

// Serve is the body of a package's TestHelperProcess: it runs the role
// that PROGCACHE_HELPER names and ends the process, with status 0, or 3
// after printing "ERROR" and the error. Without PROGCACHE_HELPER it skips
// the test, which is then no test.
func Serve(t *testing.T, roles map[string]func() error) {
	role := os.Getenv("PROGCACHE_HELPER")
	if role == "" {
		t.Skip("helper process only")
	}
	run, ok := roles[role]
	err := fmt.Errorf("unknown role %q", role)
	if ok {
		err = run()
	}
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// Start starts the test binary as a helper process with env added to its
// environment, and returns it and a scanner of its standard output.
func Start(t testing.TB, ctx context.Context, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	// The child's stdin is a pipe the parent keeps open until the test
	// ends, so BlockUntilKilled blocks in a read (a bare select{} would be
	// reported as a deadlock by the runtime and end the child).
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	cmd.Stdin = r
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out)
}

// BlockUntilKilled parks a helper process until its parent kills it (or
// closes its stdin at the end of the test).
func BlockUntilKilled() {
	_, _ = io.Copy(io.Discard, os.Stdin) // EOF or an error: either way the parent is done
	os.Exit(4)
}
