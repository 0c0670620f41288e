package release

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(p, []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(b) != "module x\n" || fi.Mode().Perm() != 0o644 {
		t.Errorf("got %q mode %v", b, fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files left in the directory, want only go.mod", len(ents))
	}
	// A directory in the way of the rename: the old file stays whole and
	// no temporary file is left.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	os.Mkdir(filepath.Join(sub, "go.mod"), 0o755)
	os.WriteFile(filepath.Join(sub, "go.mod", "x"), nil, 0o644)
	if err := writeFileAtomic(filepath.Join(sub, "go.mod"), []byte("new"), 0o644); err == nil {
		t.Fatal("renaming over a non-empty directory succeeded")
	}
	if ents, _ := os.ReadDir(sub); len(ents) != 1 {
		t.Errorf("%d entries in %s after a failed write, want only the directory", len(ents), sub)
	}
}
