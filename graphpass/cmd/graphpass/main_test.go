package main

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/accelkit/accelkit/graphpass"
	gd "github.com/accelkit/accelkit/graphpass/graphpasstest"
)

func TestCLI(t *testing.T) {
	t.Setenv(graphpass.EnvDisableHostComputePin, "")
	dir := t.TempDir()
	in := filepath.Join(dir, "model.pb")
	out := filepath.Join(dir, "model.pinned.pb")
	pb := gd.Model(30)
	if err := os.WriteFile(in, pb, 0o644); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	if code := run([]string{"-in", in, "-out", out, "-pass", "pin-host-compute", "-report"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rep := stdout.String()
	if !strings.Contains(rep, "pin-host-compute: visited=") || !strings.Contains(rep, `block0/pack (Pack): "/job:localhost/replica:0/task:0/device:GPU:0" -> "/job:localhost/replica:0/task:0/device:CPU:0"`) {
		t.Fatalf("report:\n%s", rep)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graphpass.Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if d := g.Node("block0/ss").Device(); !strings.HasSuffix(d, "CPU:0") {
		t.Errorf("block0/ss on %q", d)
	}

	// -dump prints nodes as text.
	stdout.Reset()
	if code := run([]string{"-in", out, "-dump"}, &stdout, &stderr); code != 0 {
		t.Fatalf("dump exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "block0/reshape = Reshape(block0/mm, block0/pack) @/job:localhost/replica:0/task:0/device:GPU:0 {T=float, Tshape=int32}") {
		t.Errorf("dump:\n%s", stdout.String())
	}
	if !strings.Contains(stdout.String(), "block0/w = Const() @/job:localhost/replica:0/task:0/device:GPU:0 {dtype=float, value=tensor<float[128,128]>}") {
		t.Errorf("dump lacks the const:\n%s", stdout.String())
	}

	// With the pass disabled by environment the output equals the input.
	t.Setenv(graphpass.EnvDisableHostComputePin, "1")
	stdout.Reset()
	if code := run([]string{"-in", in, "-out", out, "-report"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, pb) {
		t.Error("disabled pass changed the graph")
	}
	if !strings.Contains(stdout.String(), "disabled by ACCELKIT_DISABLE_HOST_COMPUTE_PIN=1") {
		t.Errorf("report:\n%s", stdout.String())
	}
}

func TestCLIErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pb")
	if err := os.WriteFile(bad, []byte{0x0a, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.pb")
	if err := os.WriteFile(good, gd.Model(12), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{}, 2, "-in is required"},
		{[]string{"-in", good}, 2, "-out is required"},
		{[]string{"-in", good, "-out", filepath.Join(dir, "o.pb"), "-pass", "nope"}, 2, `graphpass: -pass: unknown pass "nope"; valid: pin-host-compute`},
		// Flags are checked before the input is read.
		{[]string{"-in", bad, "-out", filepath.Join(dir, "o.pb"), "-pass", "nope"}, 2, `unknown pass "nope"`},
		{[]string{"-in", good, "-dump", "extra.pb"}, 2, `graphpass: unexpected argument "extra.pb": name the input with -in and the output with -out`},
		{[]string{"-in", bad, "-dump"}, 1, "graphpass: -in " + bad + ": malformed graphdef: graphdef field 1 at byte 0: "},
		{[]string{"-in", bad, "-dump"}, 1, "; want a binary GraphDef, as tf.io.write_graph(..., as_text=False) writes"},
		{[]string{"-in", filepath.Join(dir, "missing.pb"), "-dump"}, 1, "graphpass: -in " + filepath.Join(dir, "missing.pb") + ": no such file or directory"},
		{[]string{"-in", good, "-out", filepath.Join(dir, "nodir", "o.pb")}, 1, "-out " + filepath.Join(dir, "nodir", "o.pb") + ": its directory " + filepath.Join(dir, "nodir") + " does not exist; create it first"},
		{[]string{"-in", good, "-out", filepath.Join(good, "o.pb")}, 1, "graphpass: -out " + filepath.Join(good, "o.pb") + ": "}, // the OS's words for "not a directory"
		{[]string{"-bogus"}, 2, "graphpass: flag provided but not defined: -bogus\n\nusage: graphpass"},
		{[]string{"-max-bytes", "lots"}, 2, `invalid value "lots" for flag -max-bytes`},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stderr.String(), tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.code, tt.msg)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: wrote to stdout on failure: %q", tt.args, stdout.String())
		}
	}
}

// dirNames returns the sorted names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// mustRead returns the contents of path.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCLIHelp(t *testing.T) {
	for _, arg := range []string{"-help", "--help"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{arg}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "usage: graphpass -in") || stderr.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %.40q, stderr %q; want 0 and the usage on stdout only", arg, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("-h: exit %d, want 0; stderr %q", code, stderr.String())
	}
	for _, want := range []string{
		"usage: graphpass -in",
		"-max-bytes int",
		"-max-bytes bytes (default 2147483647, protobuf's 2 GiB limit)",
		"at most 32 bytes per input byte",
		"devices, FIFOs and directories are refused",
		"-out is replaced atomically",
		"An existing -out keeps its permission bits; a new one gets 0644",
		"a symbolic link is refused",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, stdout.String())
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("-h wrote to stderr: %q", stderr.String())
	}
}

func TestCLIInputChecks(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.pb")
	pb := gd.Model(12)
	if err := os.WriteFile(good, pb, 0o644); err != nil {
		t.Fatal(err)
	}
	size := strconv.Itoa(len(pb))
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-in", dir, "-dump"}, 1, "-in " + dir + " is a directory, not a regular file"},
		{[]string{"-in", good, "-dump", "-max-bytes", "100"}, 1, "-in " + good + " is " + size + " bytes, more than the limit of 100 bytes (-max-bytes)"},
		{[]string{"-in", good, "-dump", "-max-bytes", "0"}, 2, "-max-bytes 0: want 1 to 2147483647"},
		{[]string{"-in", good, "-dump", "-max-bytes", "4294967296"}, 2, "want 1 to 2147483647"},
		{[]string{"-in", good, "-dump", "-max-bytes", size}, 0, ""}, // the limit itself is accepted
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stderr.String(), tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.code, tt.msg)
		}
	}
}

func TestReadBounded(t *testing.T) {
	tests := []struct {
		n, size, limit int
		err            string
	}{
		{1000, 10, 100, "grew past the limit of 100 bytes (-max-bytes) while being read"},
		{101, 100, 100, "grew past the limit"},
		{100, 100, 100, ""},
		{50, 10, 100, ""}, // grew since Stat, within the limit
		{0, 0, 100, ""},
		{10, 50, 100, ""}, // shrank since Stat
	}
	for _, tt := range tests {
		in := strings.Repeat("x", tt.n)
		b, err := readBounded(strings.NewReader(in), int64(tt.size), tt.limit)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%d bytes (stat %d, limit %d): err %v, want %q", tt.n, tt.size, tt.limit, err, tt.err)
		case tt.err == "" && (err != nil || string(b) != in):
			t.Errorf("%d bytes (stat %d, limit %d): %d bytes, err %v", tt.n, tt.size, tt.limit, len(b), err)
		}
	}
}

func TestCLIInPlace(t *testing.T) {
	t.Setenv(graphpass.EnvDisableHostComputePin, "")
	dir := t.TempDir()
	model := filepath.Join(dir, "model.pb")
	pb := gd.Model(30)
	if err := os.WriteFile(model, pb, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-in", model, "-out", model}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	g, err := graphpass.Decode(mustRead(t, model))
	if err != nil {
		t.Fatal(err)
	}
	if d := g.Node("block0/ss").Device(); !strings.HasSuffix(d, "CPU:0") {
		t.Errorf("block0/ss on %q after -in X -out X", d)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"model.pb"}) {
		t.Errorf("directory holds %q, want only model.pb", got)
	}
}

// failingWriter passes the first left bytes through and then fails as a
// full disk does.
type failingWriter struct {
	w    io.Writer
	left int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) <= f.left {
		f.left -= len(p)
		return f.w.Write(p)
	}
	n, err := f.w.Write(p[:f.left])
	f.left -= n
	if err == nil {
		err = syscall.ENOSPC
	}
	return n, err
}

// TestCLIWriteFailureKeepsFiles injects a full disk halfway through the
// output: the input, an existing output and the directory are as they were.
func TestCLIWriteFailureKeepsFiles(t *testing.T) {
	t.Setenv(graphpass.EnvDisableHostComputePin, "")
	pb := gd.Model(30)
	for _, out := range []string{"model.pb", "old.pb", "new.pb"} {
		dir := t.TempDir()
		model := filepath.Join(dir, "model.pb")
		old := filepath.Join(dir, "old.pb")
		if err := os.WriteFile(model, pb, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(old, []byte("previous output"), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		c := cli{stdout: &stdout, stderr: &stderr, wrapOutput: func(w io.Writer) io.Writer {
			return &failingWriter{w: w, left: len(pb) / 2}
		}}
		code := c.run([]string{"-in", model, "-out", filepath.Join(dir, out)})
		if code != 1 || !strings.Contains(stderr.String(), "no space left on device") || !strings.Contains(stderr.String(), "left unchanged") {
			t.Errorf("-out %s: exit %d, stderr %q; want 1 and the write error", out, code, stderr.String())
		}
		if !bytes.Equal(mustRead(t, model), pb) {
			t.Errorf("-out %s: the input changed", out)
		}
		if got := string(mustRead(t, old)); got != "previous output" {
			t.Errorf("-out %s: old.pb holds %q", out, got)
		}
		if got := dirNames(t, dir); !slices.Equal(got, []string{"model.pb", "old.pb"}) {
			t.Errorf("-out %s: directory holds %q, want model.pb and old.pb only", out, got)
		}
	}
}

func TestCLIOutputSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.pb")
	if err := os.WriteFile(model, gd.Model(12), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target.pb")
	if err := os.WriteFile(target, []byte("not ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.pb")
	if err := os.Symlink("target.pb", link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-in", model, "-out", link}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "-out "+link+" is a symbolic link (to target.pb)") {
		t.Errorf("exit %d, stderr %q; want 1 and a refusal naming the link", code, stderr.String())
	}
	if got := string(mustRead(t, target)); got != "not ours" {
		t.Errorf("the link's target was written through: %q", got)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi, err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"link.pb", "model.pb", "target.pb"}) {
		t.Errorf("directory holds %q", got)
	}
}

func TestCLIOutputNotRegularRefused(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.pb")
	if err := os.WriteFile(model, gd.Model(12), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ out, msg string }{
		{sub, "-out " + sub + " is a directory"},
	}
	// Character devices: renaming a file over one (as root) would replace
	// the device node.
	for _, dev := range []string{"/dev/null", "/dev/full"} {
		if fi, err := os.Stat(dev); err == nil && fi.Mode()&fs.ModeCharDevice != 0 {
			tests = append(tests, struct{ out, msg string }{dev, "-out " + dev + " is a character device"})
		}
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run([]string{"-in", model, "-out", tt.out}, &stdout, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), tt.msg) {
			t.Errorf("-out %s: exit %d, stderr %q; want 1 and %q", tt.out, code, stderr.String(), tt.msg)
		}
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"model.pb", "sub"}) {
		t.Errorf("directory holds %q", got)
	}
	if got := dirNames(t, sub); len(got) != 0 {
		t.Errorf("sub holds %q", got)
	}
}
