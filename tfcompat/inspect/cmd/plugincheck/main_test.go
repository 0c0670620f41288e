package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/tfcompat/inspect"
)

func TestMain(m *testing.M) {
	inspect.RunChild()
	os.Exit(m.Run())
}

// plugin builds the PJRT fixture of the inspect package's tests.
func plugin(t *testing.T, flags ...string) string {
	t.Helper()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("plugins are loaded on linux and darwin only")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the fixture plugin: %v", cc, err)
	}
	out := filepath.Join(t.TempDir(), "plugin.so")
	args := append([]string{"-shared", "-fPIC", "-fvisibility=hidden", "-o", out, "../../testdata/pjrt_fixture.c"}, flags...)
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building the fixture: %v\n%s", err, b)
	}
	return out
}

func TestRun(t *testing.T) {
	ok, old := plugin(t), plugin(t, "-DFIX_MINOR=28")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-framework", "0.94", "-init", ok}, "", &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "OK: "+ok) || !strings.Contains(out.String(), "attribute xla_version (int64) = 2") {
		t.Errorf("text output:\n%s", out.String())
	}
	out.Reset()
	code := run(context.Background(), []string{"-json", "-framework", "0.94"}, "ok:"+ok+",old:"+old, &out, &errb)
	if code != 1 {
		t.Errorf("exit %d with a failing plugin, want 1", code)
	}
	var reports []inspect.Report
	if err := json.Unmarshal(out.Bytes(), &reports); err != nil || len(reports) != 2 || reports[1].Verdict != inspect.Fail {
		t.Errorf("JSON output %v: %s", err, out.String())
	}
	if code := run(context.Background(), []string{"-h"}, "", &out, &errb); code != 0 || !strings.Contains(errb.String(), "usage: plugincheck") {
		t.Errorf("-h: exit %d, %q", code, errb.String())
	}
	for _, args := range [][]string{{"-framework", "zero"}, {"-tf", "two"}, {}} {
		errb.Reset()
		if code := run(context.Background(), args, "", &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("run(%q) = %d, %q; want 2 and a message", args, code, errb.String())
		}
	}
}
