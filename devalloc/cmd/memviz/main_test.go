package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// writeSnapshot writes the snapshot of an allocator holding one 3 MiB
// block, with a trace, to dir/snap.json (and its pickle beside it).
func writeSnapshot(t *testing.T, dir string) string {
	t.Helper()
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	a, err := devalloc.New(dev, devalloc.Config{HistoryEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Alloc(3<<20, dev.DefaultStream()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "snap.json")
	if err := a.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	good := writeSnapshot(t, dir)
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"stats": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		out, err string
	}{
		{"page", []string{good}, 0, "<svg", ""},
		{"-h", []string{"-h"}, 0, "usage: memviz snapshot.json", ""},
		{"-help", []string{"-help"}, 0, "Allocator.WriteSnapshot", ""},
		{"--help", []string{"--help"}, 0, "Exit status: 0 on success", ""},
		{"no args", nil, 2, "", "memviz: want one snapshot file, got 0 arguments\n\nusage: memviz snapshot.json"},
		{"two args", []string{good, good}, 2, "", "want one snapshot file, got 2 arguments"},
		{"unknown flag", []string{"-o", "x.html", good}, 2, "", "memviz: flag provided but not defined: -o (memviz takes no flags but -pickle, -max-bytes N and -h)"},
		{"over -max-bytes", []string{"-max-bytes", "100", good}, 1, "", "longer than the read limit of 100 bytes"},
		{"pickle over -max-bytes", []string{"-pickle", "-max-bytes=100", good}, 1, "", "memviz -max-bytes take a larger one"},
		{"within -max-bytes", []string{"-pickle", "-max-bytes", "100000000", good}, 0, "\x80\x02}", ""},
		{"-max-bytes 0", []string{"-max-bytes", "0", good}, 2, "", "memviz: -max-bytes 0: want a positive number of bytes"},
		{"-max-bytes not a number", []string{"-max-bytes", "1GiB", good}, 2, "", "invalid value \"1GiB\" for flag -max-bytes"},
		{"pickle", []string{"-pickle", good}, 0, "\x80\x02}", ""},
		{"pickle of a bad file", []string{"-pickle", bad}, 1, "", `no "segments" array`},
		{"dash-named file after --", []string{"--", "-snap.json"}, 1, "", "open -snap.json: no such file"},
		{"missing file", []string{filepath.Join(dir, "none.json")}, 1, "", "no such file or directory (want a snapshot JSON file written by devalloc's Allocator.WriteSnapshot)"},
		{"not a snapshot", []string{bad}, 1, "", `no "segments" array`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tc.args, &out, &errb); code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			if !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
				t.Errorf("stdout %.80q stderr %q; want %q and %q in them", out.String(), errb.String(), tc.out, tc.err)
			}
			if tc.code != 0 && out.Len() != 0 {
				t.Errorf("wrote %d bytes to stdout on failure", out.Len())
			}
			if tc.code == 0 && errb.Len() != 0 {
				t.Errorf("wrote to stderr on success: %q", errb.String())
			}
		})
	}
}

// TestRunPickle: -pickle writes the same bytes as the pickle WriteSnapshot
// wrote beside the JSON.
func TestRunPickle(t *testing.T) {
	path := writeSnapshot(t, t.TempDir())
	want, err := os.ReadFile(memsnap.PicklePath(path))
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-pickle", path}, &out, &errb); code != 0 || !bytes.Equal(out.Bytes(), want) {
		t.Errorf("exit %d (stderr %q); the pickle differs from WriteSnapshot's (%d bytes, want %d)", code, errb.String(), out.Len(), len(want))
	}
}
