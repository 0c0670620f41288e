package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

var errInjected = errors.New("injected write failure")

// writer is a test's side of one API: Create and WriteFile on a path, or
// CreateIn and WriteFileIn on a name in a root over dir.
type writer struct {
	name      string
	create    func(t *testing.T, dir, name string, perm os.FileMode) (*File, error)
	writeFile func(t *testing.T, dir, name string, perm os.FileMode, write func(io.Writer) error) error
}

func openRoot(t *testing.T, dir string) *os.Root {
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

var writers = []writer{
	{"path",
		func(t *testing.T, dir, name string, perm os.FileMode) (*File, error) {
			return Create(filepath.Join(dir, filepath.FromSlash(name)), perm)
		},
		func(t *testing.T, dir, name string, perm os.FileMode, write func(io.Writer) error) error {
			return WriteFile(filepath.Join(dir, filepath.FromSlash(name)), perm, write)
		}},
	{"root",
		func(t *testing.T, dir, name string, perm os.FileMode) (*File, error) {
			return CreateIn(openRoot(t, dir), name, perm)
		},
		func(t *testing.T, dir, name string, perm os.FileMode, write func(io.Writer) error) error {
			return WriteFileIn(openRoot(t, dir), name, perm, write)
		}},
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func content(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

// umasked is perm as the system creates a new file with it.
func umasked(t *testing.T, perm os.FileMode) os.FileMode {
	p := filepath.Join(t.TempDir(), "probe")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, perm)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestPolicy proves the package's policy (doc.go), through both the path
// and the root API: a new file's permissions, an existing file's kept, a
// failed write leaving the old file and no temporary file, a link or a
// directory at the destination refused and left alone, several files
// renamed only once all are written, and no name leading out of a root.
func TestPolicy(t *testing.T) {
	for _, w := range writers {
		t.Run(w.name+"/new file", func(t *testing.T) {
			dir := t.TempDir()
			if err := w.writeFile(t, dir, "out.json", 0o640, content("new")); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(filepath.Join(dir, "out.json"))
			fi, err := os.Stat(filepath.Join(dir, "out.json"))
			if err != nil || string(got) != "new" {
				t.Fatalf("out.json = %q, %v", got, err)
			}
			if runtime.GOOS != "windows" && fi.Mode().Perm() != umasked(t, 0o640) {
				t.Errorf("new file mode %v, want 0640 less the umask (%v)", fi.Mode().Perm(), umasked(t, 0o640))
			}
			if n := names(t, dir); !slices.Equal(n, []string{"out.json"}) {
				t.Errorf("directory holds %q", n)
			}
		})
		t.Run(w.name+"/existing keeps its mode", func(t *testing.T) {
			if runtime.GOOS == "windows" {
				t.Skip("Windows files have no permission bits but read-only")
			}
			dir := t.TempDir()
			p := filepath.Join(dir, "out.json")
			if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			// Bits a usual umask (022) clears: kept all the same.
			if err := os.Chmod(p, 0o666); err != nil {
				t.Fatal(err)
			}
			if err := w.writeFile(t, dir, "out.json", 0o600, content("new")); err != nil {
				t.Fatal(err)
			}
			fi, _ := os.Stat(p)
			if got, _ := os.ReadFile(p); string(got) != "new" || fi.Mode().Perm() != 0o666 {
				t.Errorf("replaced file %q mode %v, want \"new\" with the old 0666", got, fi.Mode().Perm())
			}
		})
		t.Run(w.name+"/failed write leaves the old file", func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "out.json")
			if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			// More than the buffer, so part of it reached the temporary file.
			err := w.writeFile(t, dir, "out.json", 0o600, func(w io.Writer) error {
				if _, err := w.Write(bytes.Repeat([]byte("x"), 200<<10)); err != nil {
					return err
				}
				return errInjected
			})
			if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "left unchanged") {
				t.Fatalf("err = %v, want the write's error saying out.json is unchanged", err)
			}
			if got, _ := os.ReadFile(p); string(got) != "old" {
				t.Errorf("destination changed to %.20q", got)
			}
			if n := names(t, dir); !slices.Equal(n, []string{"out.json"}) {
				t.Errorf("directory holds %q after the failure, want only out.json", n)
			}
		})
		t.Run(w.name+"/symlink refused", func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(t.TempDir(), "precious")
			if err := os.WriteFile(target, []byte("not yours"), 0o644); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "out.json")
			if err := os.Symlink(target, link); err != nil {
				t.Skipf("no symlinks here: %v", err)
			}
			err := w.writeFile(t, dir, "out.json", 0o600, content("new"))
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), target) {
				t.Fatalf("err = %v, want ErrNotRegular naming the link and its target", err)
			}
			if got, _ := os.ReadFile(target); string(got) != "not yours" {
				t.Errorf("written through the link: %q", got)
			}
			if got, err := os.Readlink(link); err != nil || got != target {
				t.Errorf("link now %q, %v; want it untouched", got, err)
			}
			if n := names(t, dir); !slices.Equal(n, []string{"out.json"}) {
				t.Errorf("directory holds %q", n)
			}
		})
		t.Run(w.name+"/directory refused", func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "out.json", "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := w.create(t, dir, "out.json", 0o600); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "directory") {
				t.Fatalf("err = %v, want ErrNotRegular naming a directory", err)
			}
			if n := names(t, dir); !slices.Equal(n, []string{"out.json"}) {
				t.Errorf("directory holds %q", n)
			}
		})
		t.Run(w.name+"/several files renamed once all are written", func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			a, err := w.create(t, dir, "a.json", 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Cleanup()
			b, err := w.create(t, dir, "sub/b.json", 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Cleanup()
			io.WriteString(a, "a")
			io.WriteString(b, "b")
			if _, err := os.Stat(filepath.Join(dir, "a.json")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a.json visible before Commit: %v", err)
			}
			if err := errors.Join(a.Commit(), b.Commit()); err != nil {
				t.Fatal(err)
			}
			ga, _ := os.ReadFile(filepath.Join(dir, "a.json"))
			gb, _ := os.ReadFile(filepath.Join(dir, "sub", "b.json"))
			if string(ga) != "a" || string(gb) != "b" {
				t.Errorf("a.json %q, sub/b.json %q", ga, gb)
			}
			if err := a.Cleanup(); err != nil {
				t.Errorf("Cleanup after Commit: %v", err)
			}
			if err := a.Commit(); err == nil {
				t.Errorf("a second Commit succeeded")
			}
			if _, err := a.Write([]byte("x")); err == nil {
				t.Errorf("Write after Commit succeeded")
			}
			if n := names(t, dir); !slices.Equal(n, []string{"a.json", "sub"}) {
				t.Errorf("directory holds %q", n)
			}
			if n := names(t, filepath.Join(dir, "sub")); !slices.Equal(n, []string{"b.json"}) {
				t.Errorf("sub holds %q", n)
			}
		})
	}
	t.Run("root/no way out", func(t *testing.T) {
		outside := t.TempDir()
		dir := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
			t.Skipf("no symlinks here: %v", err)
		}
		r := openRoot(t, dir)
		for _, name := range []string{"../escape.json", "link/escape.json"} {
			if err := WriteFileIn(r, name, 0o600, content("x")); err == nil {
				t.Errorf("WriteFileIn(%q) succeeded", name)
			}
		}
		if n := names(t, outside); len(n) != 0 {
			t.Errorf("written outside the root: %q", n)
		}
		if _, err := CreateIn(nil, "x", 0o600); err == nil {
			t.Errorf("CreateIn with a nil root succeeded")
		}
	})
}
