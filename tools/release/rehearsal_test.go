package release

import (
	"archive/zip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// rehearse builds a rehearsal of the test repository, closed with the test.
func (r *testRepo) rehearse() *Rehearsal {
	r.t.Helper()
	reh, err := NewRehearsal(r.dir, r.rehearsal)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(reh.Close)
	return reh
}

// alone prepares folder of the test repository alone, cleaned up with the test.
func (r *testRepo) alone(reh *Rehearsal, folder string) *Alone {
	r.t.Helper()
	a, err := reh.Alone(folder)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { a.Close() })
	return a
}

func zipNames(t *testing.T, r *Rehearsal, folder string) []string {
	t.Helper()
	z := r.Zips[folder]
	p := filepath.Join(r.Dir, "proxy", filepath.FromSlash(z.Path), "@v", z.Version+".zip")
	zr, err := zip.OpenReader(p)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, strings.TrimPrefix(f.Name, z.Path+"@"+z.Version+"/"))
	}
	slices.Sort(names)
	return names
}

func TestRehearsalZipsTheWorkTree(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	r.write(".gitignore", "*.out\n")
	r.write("a/junk.out", "ignored\n")        // ignored: not in a commit, not in the zip
	r.write("a/new.go", "package a\n")        // untracked: would be committed
	r.write("a/sub/go.mod", "module x/sub\n") // a nested module: never in a's zip
	r.write("a/sub/s.go", "package sub\n")
	r.write("b/LICENSE", "b's own license\n") // b's own wins over the root's
	reh := r.rehearse()
	if got, want := zipNames(t, reh, "a"), []string{"CHANGELOG.md", "LICENSE", "a.go", "go.mod", "new.go"}; !slices.Equal(got, want) {
		t.Errorf("a's zip holds %q, want %q", got, want)
	}
	if reh.Zips["a"].License != "root" || reh.Zips["b"].License != "module" {
		t.Errorf("licenses: a from %q, b from %q; want root and module", reh.Zips["a"].License, reh.Zips["b"].License)
	}
}

func TestRehearsalRefusesForeignFolder(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	foreign := t.TempDir()
	keep := filepath.Join(foreign, "precious.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewRehearsal(r.dir, foreign)
	if err == nil || !strings.Contains(err.Error(), "not a rehearsal folder") {
		t.Fatalf("NewRehearsal in a folder of someone else's files: err = %v", err)
	}
	if data, err := os.ReadFile(keep); err != nil || string(data) != "mine" {
		t.Fatalf("the foreign file was touched: %q, %v", data, err)
	}
}

func TestRehearsalLockedFolder(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	first, err := NewRehearsal(r.dir, r.rehearsal)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := NewRehearsal(r.dir, r.rehearsal); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second rehearsal in a folder in use: err = %v", err)
	}
}

func TestAloneResolvesThroughTheProxy(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	a := r.alone(r.rehearse(), "b")
	if out, err := a.Run(nil, "build", "./..."); err != nil {
		t.Fatalf("b alone, with a only in the rehearsal proxy: %v\n%s", err, out)
	}
	// b's go.mod lacks nothing, and the go.sum lines of a stay out of the tree.
	if diff, err := a.Tidy(false); err != nil || diff != "" {
		t.Fatalf("Tidy = %q, %v; want tidy", diff, err)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "b", "go.sum")); !os.IsNotExist(err) {
		t.Errorf("b/go.sum appeared in the work tree: %v", err)
	}
	if st := r.git("status", "--porcelain"); st != "" {
		t.Errorf("work tree changed:\n%s", st)
	}
}

func TestTidyReportsAndWrites(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	// An unused requirement: tidy drops it.
	r.write("a/go.mod", "module "+ModulePrefix+"a\n\ngo 1.26\n\nrequire "+ModulePrefix+"b v0.1.0\n")
	a := r.alone(r.rehearse(), "a")
	diff, err := a.Tidy(false)
	if err != nil || !strings.Contains(diff, "-require "+ModulePrefix+"b v0.1.0") {
		t.Fatalf("Tidy(false) = %q, %v; want the unused requirement reported", diff, err)
	}
	if _, err := a.Tidy(true); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(r.dir, "a", "go.mod"))
	if strings.Contains(string(data), ModulePrefix+"b") {
		t.Errorf("go.mod after Tidy(true):\n%s", data)
	}
}

const consumerProgram = "package main\n\nimport (\n\t\"fmt\"\n\n\t\"" + ModulePrefix + "b\"\n)\n\nfunc main() { fmt.Println(\"H is\", b.H()) }\n"

func TestConsumer(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	r.write("b/README.md", "# b\n\n```go\n"+consumerProgram+"```\n\n## "+SumHeading+"\n\n- none\n")
	r.write("b/cmd/hello/main.go", "package main\n\nimport (\n\t\"flag\"\n\t\"fmt\"\n)\n\nfunc main() {\n\tflag.Parse()\n\tfmt.Println(\"hello\")\n}\n")
	reh, err := NewRehearsal(r.dir, r.rehearsal)
	if err != nil {
		t.Fatal(err)
	}
	defer reh.Close()
	rep, err := reh.Consumer("b")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("problems: %q", rep.Problems)
	}
	if rep.Output != "H is 1" {
		t.Errorf("program output %q, want %q", rep.Output, "H is 1")
	}
	if !slices.Equal(rep.Commands, []string{ModulePrefix + "b/cmd/hello"}) {
		t.Errorf("commands installed: %q", rep.Commands)
	}

	// A README whose go.sum list is wrong, and a command whose -h fails.
	r.write("b/README.md", "# b\n\n```go\n"+consumerProgram+"```\n\n## "+SumHeading+"\n\n- `example.com/x` v1.0.0\n")
	r.write("b/cmd/hello/main.go", "package main\n\nimport \"os\"\n\nfunc main() { os.Exit(3) }\n")
	reh.Close()
	if reh, err = NewRehearsal(r.dir, r.rehearsal); err != nil {
		t.Fatal(err)
	}
	defer reh.Close()
	if rep, err = reh.Consumer("b"); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(rep.Problems, "\n")
	for _, want := range []string{"replace the section with", "-h` must print usage and exit 0"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}

	// No program at all.
	r.write("b/README.md", "# b\n\n```go\nb.H()\n```\n")
	reh.Close()
	if reh, err = NewRehearsal(r.dir, r.rehearsal); err != nil {
		t.Fatal(err)
	}
	defer reh.Close()
	if rep, err = reh.Consumer("b"); err != nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "no consumer program") {
		t.Fatalf("README without a program: %q, %v", rep.Problems, err)
	}
}

func TestWorkCheckAndSync(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	v, err := ReadVersions(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if probs, err := CheckWork(r.dir, v); err != nil || len(probs) > 0 {
		t.Fatalf("CheckWork on a good go.work = %q, %v", probs, err)
	}
	r.write("versions.yaml", "modules:\n  a: v0.2.0\n  b: v0.1.0\n")
	if v, err = ReadVersions(r.dir); err != nil {
		t.Fatal(err)
	}
	probs, _ := CheckWork(r.dir, v)
	if len(probs) != 2 {
		t.Fatalf("CheckWork after a's bump = %q, want the missing v0.2.0 replace and the stale v0.1.0 one", probs)
	}
	if changed, err := SyncWork(r.dir, v); err != nil || !changed {
		t.Fatalf("SyncWork = %v, %v", changed, err)
	}
	if probs, _ := CheckWork(r.dir, v); len(probs) > 0 {
		t.Fatalf("CheckWork after SyncWork = %q", probs)
	}
	if changed, _ := SyncWork(r.dir, v); changed {
		t.Error("a second SyncWork changed go.work again")
	}
}

func TestCompareWorkspace(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	reh := r.rehearse()
	if diffs, err := reh.CompareWorkspace(); err != nil || len(diffs) > 0 {
		t.Fatalf("CompareWorkspace with no third-party modules = %v, %v", diffs, err)
	}
}

func TestReadmeProgram(t *testing.T) {
	for _, tc := range []struct {
		name, readme, want string
	}{
		{"first main block", "x\n```go\nfoo()\n```\n```go\npackage main\n\nfunc main() {}\n```\n```go\npackage main // second\n```\n", "package main\n\nfunc main() {}\n"},
		{"not go", "```sh\npackage main\n```\n", ""},
		{"go with more info", "```go title\npackage main\n```\n", ""},
		{"tilde fence", "~~~go\npackage main\n~~~\n", "package main\n"},
		{"longer fence keeps inner fences", "````go\npackage main\n// ```\n````\n", "package main\n// ```\n"},
		{"unclosed", "```go\npackage main\n", ""},
	} {
		got, ok := ReadmeProgram(tc.readme)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: ReadmeProgram = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

func TestReadmeSums(t *testing.T) {
	readme := "# m\n\n## " + SumHeading + "\n\nIntro line.\n\n- `golang.org/x/sys` v0.49.0\n- `go.etcd.io/bbolt` v1.5.0 (the bbolt tier)\n\n## Next\n\n- `not/this` v1\n"
	got, found := ReadmeSums(readme)
	want := []string{"go.etcd.io/bbolt v1.5.0", "golang.org/x/sys v0.49.0"}
	if !found || !slices.Equal(got, want) {
		t.Errorf("ReadmeSums = %q, %v; want %q", got, found, want)
	}
	if got, found := ReadmeSums("## " + SumHeading + "\n\n- none\n"); !found || len(got) != 0 {
		t.Errorf("ReadmeSums(none) = %q, %v", got, found)
	}
	if _, found := ReadmeSums("# nothing\n"); found {
		t.Error("ReadmeSums found a heading that is not there")
	}
	sum := "golang.org/x/sys v0.49.0 h1:x=\ngolang.org/x/sys v0.49.0/go.mod h1:y=\ngolang.org/x/sys v0.47.0/go.mod h1:z=\n" + ModulePrefix + "driver v0.1.0 h1:w=\n"
	if got := SumModules(sum); !slices.Equal(got, []string{"golang.org/x/sys v0.49.0"}) {
		t.Errorf("SumModules = %q", got)
	}
	if back, _ := ReadmeSums(SumSection(want)); !slices.Equal(back, want) {
		t.Errorf("SumSection does not read back: %q", back)
	}
}

// TestShellEnvFromAnyModule evals the printed environment in a shell and,
// from a module outside the repository, gets, builds and runs b at its
// untagged version: what the README tells a user to do before the tags.
// GOPROXY=off behind the rehearsal proxy (newTestRepo) keeps it offline,
// so only the printed environment can make it resolve.
func TestShellEnvFromAnyModule(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no POSIX shell")
	}
	r := newTestRepo(t, "v0.1.0")
	reh := r.rehearse()
	env := reh.ShellEnv()
	for _, want := range []string{
		"export GOPROXY='" + fileURL(reh.ProxyDir()) + ",",
		"export GONOSUMDB='" + strings.TrimSuffix(ModulePrefix, "/") + "'\n",
		"export GOMODCACHE='" + filepath.Join(reh.Dir, "modcache") + "'\n",
		"export GOWORK='off'\n",
	} {
		if !strings.Contains(env, want) {
			t.Errorf("ShellEnv lacks %q:\n%s", want, env)
		}
	}
	// The user's GOFLAGS, and a module cache the next rehearsal can empty.
	if !regexp.MustCompile(`(?m)^export GOFLAGS='[^'\n]*-modcacherw'$`).MatchString(env) {
		t.Errorf("ShellEnv's GOFLAGS lacks -modcacherw:\n%s", env)
	}
	scratch := t.TempDir()
	envFile := filepath.Join(t.TempDir(), "env.sh")
	for name, data := range map[string]string{
		filepath.Join(scratch, "go.mod"):  "module example.com/try\n\ngo 1.26\n",
		filepath.Join(scratch, "main.go"): consumerProgram,
		envFile:                           env,
	} {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := `eval "$(cat "$1")" && go get ` + ModulePrefix + `b@v0.1.0 && go build -o try . && ./try`
	out, err := run(scratch, nil, sh, "-c", script, "sh", envFile)
	if err != nil {
		t.Fatalf("a scratch module under the printed environment: %v", err)
	}
	if !strings.Contains(out, "H is 1") {
		t.Errorf("the scratch program printed %q, want %q", out, "H is 1")
	}
	if _, err := os.Stat(filepath.Join(reh.Dir, "modcache", "cache", "download", filepath.FromSlash(ModulePrefix), "b", "@v", "v0.1.0.zip")); err != nil {
		t.Errorf("b was not downloaded into the rehearsal's own module cache: %v", err)
	}
}

func TestShellQuote(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no POSIX shell")
	}
	for _, s := range []string{"", "plain", "with space", "it's", `$HOME "q" \n`, "a\nb"} {
		out, err := run("", nil, sh, "-c", "printf %s "+shellQuote(s))
		if err != nil || out != s {
			t.Errorf("sh read %s as %q (%v), want %q", shellQuote(s), out, err, s)
		}
	}
}

// TestConsumerStderr: a README program that logs to stderr what it
// survives (redistier's fails open without a server) shows only its stdout
// when it exits 0; when it fails, its stderr is in the problem.
func TestConsumerStderr(t *testing.T) {
	r := newTestRepo(t, "v0.1.0")
	prog := func(exit int) string {
		return "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\n\t\"" + ModulePrefix + "b\"\n)\n\nfunc main() {\n" +
			"\tfor range 3 {\n\t\tfmt.Fprintln(os.Stderr, \"dial tcp 127.0.0.1:6379: connect: connection refused\")\n\t}\n" +
			"\tfmt.Println(\"H is\", b.H())\n\tos.Exit(" + fmt.Sprint(exit) + ")\n}\n"
	}
	r.write("b/README.md", "# b\n\n```go\n"+prog(0)+"```\n\n## "+SumHeading+"\n\n- none\n")
	reh := r.rehearse()
	rep, err := reh.Consumer("b")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 || rep.Output != "H is 1" || rep.Stderr != 3 {
		t.Fatalf("a passing program: output %q, %d stderr line(s), problems %q; want %q, 3, none", rep.Output, rep.Stderr, rep.Problems, "H is 1")
	}

	r.write("b/README.md", "# b\n\n```go\n"+prog(1)+"```\n\n## "+SumHeading+"\n\n- none\n")
	reh.Close()
	reh = r.rehearse()
	if rep, err = reh.Consumer("b"); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(rep.Problems, "\n")
	if !strings.Contains(all, "the README program failed") || !strings.Contains(all, "connection refused") || !strings.Contains(all, "H is 1") {
		t.Errorf("a failing program's problems lack its stderr and stdout:\n%s", all)
	}
}
