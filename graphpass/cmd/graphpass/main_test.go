package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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
		{[]string{"-in", good, "-out", filepath.Join(dir, "o.pb"), "-pass", "nope"}, 2, "valid: pin-host-compute"},
		{[]string{"-in", bad, "-dump"}, 1, "malformed"},
		{[]string{"-in", filepath.Join(dir, "missing.pb"), "-dump"}, 1, "no such file"},
		{[]string{"-bogus"}, 2, "flag provided but not defined"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stderr.String(), tt.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.code, tt.msg)
		}
	}
}
