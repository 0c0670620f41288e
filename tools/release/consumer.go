package release

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ConsumerReport is what a fresh consumer of one module got.
type ConsumerReport struct {
	Module   string   // folder
	Output   string   // the README program's standard output, first lines
	Stderr   int      // lines the README program wrote to standard error, shown only when it fails
	Sums     []string // "module version" of every third-party module the consumer's go.sum downloads
	Accelkit []string // the repository's modules the consumer's go.sum records
	Cgo      []string // packages with cgo files in the consumer's build
	Commands []string // commands installed with `go install path@version`
	Built    bool     // the consumer built, vetted and listed its packages
	Problems []string
}

// programTimeout bounds a README program and a command's -h: both are
// meant to take well under a second.
const programTimeout = 2 * time.Minute

// Consumer builds a fresh module outside the repository that requires only
// module folder at its rehearsal version, the way a user starts: `go get`,
// `go mod tidy`, build, vet, list the packages with cgo, run the program of the
// module README, and `go install` each of the module's commands at that
// version and run it with -h. It compares the consumer's go.sum with the
// list the README gives under SumHeading.
func (r *Rehearsal) Consumer(folder string) (*ConsumerReport, error) {
	z, ok := r.Zips[folder]
	if !ok {
		return nil, fmt.Errorf("module %s is not released (versions.yaml)", folder)
	}
	rep := &ConsumerReport{Module: folder}
	add := func(format string, args ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...)) }
	readmePath := filepath.Join(r.Repo, filepath.FromSlash(folder), "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return nil, err
	}
	program, ok := ReadmeProgram(string(readme))
	if !ok {
		add("%s/README.md has no consumer program: add a fenced ```go block that starts with `package main` (the rehearsal builds and runs the first one)", folder)
		return rep, nil
	}
	dir, err := os.MkdirTemp("", "consumer-"+strings.ReplaceAll(folder, "/", "-")+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	goLine := "1.26"
	if f, err := ReadGoMod(r.Repo, folder); err == nil && f.Go != nil {
		goLine = f.Go.Version
	}
	files := map[string]string{
		"go.mod":  "module example.com/consumer\n\ngo " + goLine + "\n",
		"main.go": program,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return nil, err
		}
	}
	env := r.Env()
	step := func(extra []string, args ...string) (string, bool) {
		out, err := runTimeout(dir, append(append([]string{}, env...), extra...), 10*time.Minute, "go", args...)
		if err != nil {
			add("consumer of %s: go %s failed:\n%s", folder, strings.Join(args, " "), indent(out))
			return out, false
		}
		return out, true
	}
	at := z.Path + "@" + z.Version
	bin := filepath.Join(dir, "consumer"+exeSuffix())
	if _, ok := step(nil, "get", at); !ok {
		return rep, nil
	}
	if _, ok := step(nil, "mod", "tidy"); !ok {
		return rep, nil
	}
	if _, ok := step(nil, "build", "-o", bin, "."); !ok {
		return rep, nil
	}
	if _, ok := step(nil, "vet", "./..."); !ok {
		return rep, nil
	}
	out, ok := step(nil, "list", "-deps", "-f", "{{if .CgoFiles}}{{.ImportPath}}{{end}}", ".")
	if !ok {
		return rep, nil
	}
	rep.Cgo, rep.Built = strings.Fields(out), true
	// A README program may log to stderr what it is meant to survive (the
	// redistier one: connection refused, with no Redis server, as it fails
	// open); a passing run shows only its stdout, a failing one everything.
	stdout, stderr, err := runProgram(dir, bin)
	if err != nil {
		add("consumer of %s: the README program failed: %v\n%s", folder, err, indent(stdout+stderr))
	}
	rep.Output = firstLines(stdout, 6)
	if s := strings.TrimRight(stderr, "\n"); s != "" {
		rep.Stderr = strings.Count(s, "\n") + 1
	}

	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	rep.Accelkit, rep.Sums = sumZips(string(sum))
	listed, found := ReadmeSums(string(readme))
	switch {
	case !found:
		add("%s/README.md does not say what a consumer's go.sum holds; add this section:\n%s", folder, indent(SumSection(rep.Sums)))
	case !slices.Equal(listed, rep.Sums):
		add("%s/README.md lists a consumer's go.sum as %q, but the rehearsal's holds %q; replace the section with:\n%s",
			folder, listed, rep.Sums, indent(SumSection(rep.Sums)))
	}

	// The module's commands, installed the way its README tells users to.
	gobin := filepath.Join(dir, "bin")
	for _, cmd := range z.Commands {
		if _, ok := step([]string{"GOBIN=" + gobin}, "install", cmd+"@"+z.Version); !ok {
			continue
		}
		exe := filepath.Join(gobin, path.Base(cmd)+exeSuffix())
		if out, err := runTimeout(dir, nil, programTimeout, exe, "-h"); err != nil {
			add("%s@%s: `%s -h` must print usage and exit 0:\n%s", cmd, z.Version, path.Base(cmd), indent(out))
		}
		rep.Commands = append(rep.Commands, cmd)
	}
	return rep, nil
}

func exeSuffix() string {
	if filepath.Separator == '\\' {
		return ".exe"
	}
	return ""
}

// runTimeout is run with a time limit; the error says when it was hit.
func runTimeout(dir string, env []string, limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("%s: still running after %v, stopped", name, limit)
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// runProgram runs a README program in dir within programTimeout and
// returns its stdout and stderr apart.
func runProgram(dir, bin string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), programTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after %v, stopped", programTimeout)
	}
	return out.String(), errb.String(), err
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimRight(s, "\n"), "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (no output)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
