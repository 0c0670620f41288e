package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/tools/release"
)

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"-h"}, 0, "commands:"},
		{[]string{"--help"}, 0, "commands:"},
		{[]string{"alone", "-h"}, 0, "-race"},
		{nil, 2, "no command given"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate" (valid: list, check, tag`},
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"alone"}, 2, "alone needs at least one module folder"},
		{[]string{"check", "-create", "driver"}, 2, "check never creates tags"},
		{[]string{"steps"}, 2, "steps needs at least one task name"},
		{[]string{"steps", "vet,,smoke"}, 2, `empty task name in "vet,,smoke"`},
		{[]string{"proxy-env", "-h"}, 0, "Usage of proxy-env"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("release %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb.String(), tc.code, tc.stderr)
		}
	}
}

// fixtureRepo is a committed git repository with one released module, a,
// whose README program prints to stdout and, as redistier's does without a
// server, to stderr, then exits 0.
func fixtureRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "")
	t.Setenv("GONOSUMDB", "")
	dir := t.TempDir()
	prog := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\n\t\"" + release.ModulePrefix + "a\"\n)\n\nfunc main() {\n" +
		"\tfmt.Fprintln(os.Stderr, \"redis: dial tcp 127.0.0.1:6379: connect: connection refused\")\n\tfmt.Println(\"F is\", a.F())\n}\n"
	for name, data := range map[string]string{
		"LICENSE":        "Apache License\n",
		"versions.yaml":  "modules:\n  a: v0.1.0\n",
		"a/go.mod":       "module " + release.ModulePrefix + "a\n\ngo 1.26\n",
		"a/a.go":         "package a\n\n// F is one.\nfunc F() int { return 1 }\n",
		"a/README.md":    "# a\n\n```go\n" + prog + "```\n\n## " + release.SumHeading + "\n\n- none\n",
		"a/CHANGELOG.md": "# Changelog\n\n## [0.1.0]\n- first\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "add", "-A"},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "initial"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, out)
		}
	}
	return dir
}

// TestRehearseOutput: the summary names the proxy folder itself, and the
// README program's expected stderr stays out of a passing run.
func TestRehearseOutput(t *testing.T) {
	repo := fixtureRepo(t)
	dir := filepath.Join(t.TempDir(), "rehearsal")
	var out, errb bytes.Buffer
	if code := run([]string{"-C", repo, "-dir", dir, "rehearse"}, &out, &errb); code != 0 {
		t.Fatalf("rehearse: exit %d\n%s%s", code, out.String(), errb.String())
	}
	got := out.String()
	if want := "proxy " + filepath.Join(dir, "proxy") + " ("; !strings.Contains(got, want) {
		t.Errorf("the rehearsal's summary does not name the proxy (%q):\n%s", want, got)
	}
	if !strings.Contains(got, "F is 1") || strings.Contains(got+errb.String(), "connection refused") {
		t.Errorf("a passing README program: want its stdout and not its stderr:\n%s%s", got, errb.String())
	}
}

// TestProxyEnv: stdout is only what eval runs; the note goes to stderr.
func TestProxyEnv(t *testing.T) {
	repo := fixtureRepo(t)
	dir := filepath.Join(t.TempDir(), "rehearsal")
	var out, errb bytes.Buffer
	if code := run([]string{"-C", repo, "-dir", dir, "proxy-env"}, &out, &errb); code != 0 {
		t.Fatalf("proxy-env: exit %d\n%s", code, errb.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(line, "export ") && !strings.HasPrefix(line, "# ") {
			t.Errorf("proxy-env printed %q, which is neither an export nor a comment", line)
		}
	}
	proxy := filepath.Join(dir, "proxy")
	if !strings.Contains(out.String(), "export GOPROXY='file://"+filepath.ToSlash(proxy)+",") {
		t.Errorf("proxy-env's GOPROXY does not start with the proxy %s:\n%s", proxy, out.String())
	}
	if _, err := os.Stat(filepath.Join(proxy, "github.com", "accelkit", "accelkit", "a", "@v", "v0.1.0.zip")); err != nil {
		t.Errorf("proxy-env did not build the proxy: %v", err)
	}
	if !strings.Contains(errb.String(), "a@v0.1.0") {
		t.Errorf("proxy-env's note does not say what the proxy holds:\n%s", errb.String())
	}
	if code := run([]string{"-C", repo, "-dir", dir, "proxy-env", "a"}, &out, &errb); code != 2 {
		t.Errorf("proxy-env with an argument: exit %d, want 2", code)
	}
}
