package release

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestWriteFileAtomic checks this copy of accelkit's output-file policy
// (the atomicfile module's TestPolicy proves the original): an existing
// file's mode kept, a new one's perm less the umask, a symbolic link
// refused and left alone with its target, and a failed rename leaving the
// old file and no temporary file.
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
	if string(b) != "module x\n" || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
		t.Errorf("got %q mode %v, want the new content with the old 0600", b, fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files left in the directory, want only go.mod", len(ents))
	}

	// A new file: perm less the umask, as os.WriteFile makes it.
	fresh, probe := filepath.Join(dir, "new"), filepath.Join(t.TempDir(), "probe")
	if err := writeFileAtomic(fresh, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(probe, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	got, _ := os.Stat(fresh)
	want, _ := os.Stat(probe)
	if got.Mode().Perm() != want.Mode().Perm() {
		t.Errorf("new file mode %v, want %v (0666 less the umask)", got.Mode().Perm(), want.Mode().Perm())
	}

	// A symbolic link: refused, neither written through nor replaced.
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("not ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err == nil {
		if err := writeFileAtomic(link, []byte("new"), 0o644); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("writing over a symlink: %v, want a refusal", err)
		}
		if b, _ := os.ReadFile(target); string(b) != "not ours" {
			t.Errorf("written through the link: %q", b)
		}
		if got, err := os.Readlink(link); err != nil || got != target {
			t.Errorf("the link is now %q, %v; want it untouched", got, err)
		}
	}

	// A directory at the path: refused, and no temporary file is left.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	os.Mkdir(filepath.Join(sub, "go.mod"), 0o755)
	os.WriteFile(filepath.Join(sub, "go.mod", "x"), nil, 0o644)
	if err := writeFileAtomic(filepath.Join(sub, "go.mod"), []byte("new"), 0o644); err == nil {
		t.Fatal("writing over a non-empty directory succeeded")
	}
	if ents, _ := os.ReadDir(sub); len(ents) != 1 {
		t.Errorf("%d entries in %s after a failed write, want only the directory", len(ents), sub)
	}
}
