package release

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testRepo is a throwaway git repository with modules a and b (b requires
// a at the version given, no replace), a root LICENSE, go.work,
// versions.yaml and changelogs, committed. Its rehearsals live in a folder
// of the test and resolve offline (GOPROXY=off behind the rehearsal proxy).
type testRepo struct {
	t         *testing.T
	dir       string
	rehearsal string
}

func newTestRepo(t *testing.T, bRequires string) *testRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "")
	t.Setenv("GONOSUMDB", "")
	r := &testRepo{t: t, dir: t.TempDir(), rehearsal: filepath.Join(t.TempDir(), "rehearsal")}
	r.git("init", "-q", "-b", "main")
	r.git("config", "user.email", "test@example.com")
	r.git("config", "user.name", "test")
	r.write("LICENSE", "Apache License\nVersion 2.0, January 2004\n")
	r.write("versions.yaml", "modules:\n  a: v0.1.0\n  b: v0.1.0\nunreleased:\n  - tools\n")
	r.write("go.work", "go 1.26\n\nuse (\n\t./a\n\t./b\n)\n\nreplace "+ModulePrefix+"a v0.1.0 => ./a\n\nreplace "+ModulePrefix+"b v0.1.0 => ./b\n")
	r.write("a/go.mod", "module "+ModulePrefix+"a\n\ngo 1.26\n")
	r.write("a/a.go", "package a\n\n// F is exported.\nfunc F() int { return 1 }\n\n// G is exported.\nfunc G() int { return 2 }\n")
	r.write("a/CHANGELOG.md", "# Changelog\n\n## [0.1.0] - 2026-11-23\n- first\n")
	r.write("b/go.mod", "module "+ModulePrefix+"b\n\ngo 1.26\n\nrequire "+ModulePrefix+"a "+bRequires+"\n")
	r.write("b/b.go", "package b\n\nimport \""+ModulePrefix+"a\"\n\n// H is exported.\nfunc H() int { return a.F() }\n")
	r.write("b/CHANGELOG.md", "# Changelog\n\n## [0.1.0]\n- first\n")
	r.write("tools/go.mod", "module "+ModulePrefix+"tools\n\ngo 1.26\n")
	r.commit("initial")
	return r
}

// opts are Options whose rehearsal lives in the test's folder; quick also
// skips the tests.
func (r *testRepo) opts() Options  { return Options{RehearsalDir: r.rehearsal} }
func (r *testRepo) quick() Options { return Options{RehearsalDir: r.rehearsal, SkipTests: true} }

func (r *testRepo) write(name, content string) {
	r.t.Helper()
	path := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	out, err := run(r.dir, nil, "git", args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

func (r *testRepo) commit(msg string) {
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
}

func wantProblem(t *testing.T, err error, substr string) {
	t.Helper()
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CheckError mentioning %q", err, substr)
	}
	for _, p := range ce.Problems {
		if strings.Contains(p, substr) {
			return
		}
	}
	t.Fatalf("problems %q lack %q", ce.Problems, substr)
}

func TestCheckCleanModuleWithoutTag(t *testing.T) {
	r := newTestRepo(t, "v0.0.0")
	var lines []string
	opts := r.opts()
	opts.Log = func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	v, err := Check(r.dir, "a", opts)
	if err != nil {
		t.Fatalf("clean module a: %v", err)
	}
	if v != "v0.1.0" {
		t.Errorf("version = %s, want v0.1.0", v)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "no tag a/v* yet") {
		t.Errorf("the API check of a module with no tag says nothing of skipping:\n%s", strings.Join(lines, "\n"))
	}
}

func TestCheckDirtyTree(t *testing.T) {
	r := newTestRepo(t, "v0.0.0")
	r.write("a/extra.go", "package a\n")
	_, err := Check(r.dir, "a", r.quick())
	wantProblem(t, err, "work tree is not clean")
}

func TestCheckMissingChangelogEntry(t *testing.T) {
	r := newTestRepo(t, "v0.0.0")
	r.write("versions.yaml", "modules:\n  a: v0.2.0\n  b: v0.1.0\n")
	r.commit("bump a")
	_, err := Check(r.dir, "a", r.quick())
	wantProblem(t, err, "CHANGELOG.md has no entry for v0.2.0")
}

func TestCheckFailingTests(t *testing.T) {
	r := newTestRepo(t, "v0.0.0")
	r.write("a/a_test.go", "package a\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) {\n\tif F() != 2 {\n\t\tt.Fatal(\"F() != 2\")\n\t}\n}\n")
	r.commit("failing test")
	_, err := Check(r.dir, "a", r.opts())
	wantProblem(t, err, "tests fail")
}

func TestUnreleasedDependency(t *testing.T) {
	r := newTestRepo(t, "v0.0.0")
	_, err := Check(r.dir, "b", r.quick())
	wantProblem(t, err, "requires "+ModulePrefix+"a v0.0.0, which is not released")

	// Requiring a's next version is fine once a is tagged first in the same run.
	r = newTestRepo(t, "v0.1.0")
	if _, err := Check(r.dir, "b", r.quick()); err == nil {
		t.Fatal("b requiring untagged a v0.1.0 passed on its own")
	}
	tags, err := Tag(r.dir, []string{"b", "a"}, true, r.quick())
	if err != nil {
		t.Fatalf("tag a then b: %v", err)
	}
	if strings.Join(tags, " ") != "a/v0.1.0 b/v0.1.0" {
		t.Errorf("tags = %v, want a/v0.1.0 b/v0.1.0 in dependency order", tags)
	}
	if got := r.git("tag", "--list"); !strings.Contains(got, "a/v0.1.0") || !strings.Contains(got, "b/v0.1.0") {
		t.Errorf("git tags = %q", got)
	}
}

func TestRefusesUnreleasedModule(t *testing.T) {
	r := newTestRepo(t, "v0.0.0")
	_, err := Check(r.dir, "tools", r.quick())
	if err == nil || !strings.Contains(err.Error(), "never released") {
		t.Fatalf("tagging tools: err = %v, want a refusal", err)
	}
	if _, err := Tag(r.dir, []string{"tools"}, true, r.quick()); err == nil {
		t.Fatal("Tag created a tag for tools")
	}
	if got := r.git("tag", "--list"); got != "" {
		t.Errorf("tags after refusal: %q", got)
	}
}

func TestAPICompatibility(t *testing.T) {
	r := newTestRepo(t, "v0.0.0")
	if _, err := Tag(r.dir, []string{"a"}, true, r.quick()); err != nil {
		t.Fatal(err)
	}
	// Remove G: incompatible.
	r.write("a/a.go", "package a\n\n// F is exported.\nfunc F() int { return 1 }\n")
	r.write("a/CHANGELOG.md", "# Changelog\n\n## [0.1.1]\n- drop G\n\n## [0.2.0]\n- drop G\n\n## [0.1.0]\n- first\n")
	r.write("versions.yaml", "modules:\n  a: v0.1.1\n  b: v0.1.0\n")
	r.commit("drop G")
	_, err := Check(r.dir, "a", r.quick())
	wantProblem(t, err, "incompatible API change since v0.1.0")

	rep, err := CompareAPI(r.dir, "a", "v0.2.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Allowed || len(rep.Incompatible) != 1 {
		t.Errorf("v0.2.0 after removing G: allowed=%v incompatible=%q; want allowed with one incompatible change", rep.Allowed, rep.Incompatible)
	}
	rep.Old, rep.New = "v1.2.0", "v1.3.0"
	rep.judge()
	if rep.Allowed {
		t.Error("from v1 on, an incompatible change without a major bump was allowed")
	}
}

func TestCheckRefusesReplace(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	r.write("b/go.mod", "module "+ModulePrefix+"b\n\ngo 1.26\n\nrequire "+ModulePrefix+"a v0.1.0\n\nreplace "+ModulePrefix+"a => ../a\n")
	r.commit("replace")
	_, err := Tag(r.dir, []string{"a", "b"}, false, r.quick())
	wantProblem(t, err, "a released go.mod may not replace")
}

func TestCheckWantsLicense(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	r.git("rm", "-q", "LICENSE")
	r.commit("no license")
	_, err := Check(r.dir, "a", r.quick())
	if err == nil || !strings.Contains(err.Error(), "no license") {
		t.Fatalf("Check without any LICENSE: err = %v, want the rehearsal to refuse the zip", err)
	}
}

func TestChangelogHas(t *testing.T) {
	text := "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-01-01\n\n## v0.1.0\n"
	for v, want := range map[string]bool{"v0.2.0": true, "v0.1.0": true, "v0.3.0": false, "v0.2": false} {
		if got := ChangelogHas(text, v); got != want {
			t.Errorf("ChangelogHas(%s) = %v, want %v", v, got, want)
		}
	}
}
