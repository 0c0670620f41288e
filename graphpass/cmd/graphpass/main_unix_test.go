//go:build unix

package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	gd "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

func TestCLIOutputPermissions(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.pb")
	if err := os.WriteFile(model, gd.Model(12), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.pb")
	// An existing file keeps its bits, also those the umask would clear.
	for _, perm := range []fs.FileMode{0o600, 0o640, 0o666, 0o755} {
		if err := os.WriteFile(out, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(out, perm); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := run([]string{"-in", model, "-out", out}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != perm {
			t.Errorf("replacing a %v file left %v", perm, fi.Mode().Perm())
		}
	}
	// A new file gets what os.WriteFile(path, b, 0o644) gives: 0644 less
	// the umask.
	ref := filepath.Join(dir, "ref")
	if err := os.WriteFile(ref, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh.pb")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-in", model, "-out", fresh}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want, _ := os.Stat(ref)
	got, err := os.Stat(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode().Perm() != want.Mode().Perm() {
		t.Errorf("new output has %v, want %v", got.Mode().Perm(), want.Mode().Perm())
	}
}
