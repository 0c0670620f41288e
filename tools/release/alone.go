package release

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Alone runs the go command in one module of the repository as a consumer
// builds it: GOWORK=off, in-repo requirements resolved through the
// rehearsal proxy. The module's go.mod and go.sum are copied to a scratch
// folder and used through -modfile, so the go.sum lines of the repository's
// own modules (which change with every commit until tagged) never reach
// the work tree.
type Alone struct {
	r      *Rehearsal
	Module string // folder
	dir    string // module folder
	modDir string // scratch folder holding go.mod and go.sum
	env    []string
}

// Alone prepares module folder to be built alone.
func (r *Rehearsal) Alone(folder string) (*Alone, error) {
	dir := filepath.Join(r.Repo, filepath.FromSlash(folder))
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return nil, fmt.Errorf("module %s: no go.mod in %s", folder, dir)
	}
	scratch, err := os.MkdirTemp("", "alone-"+strings.ReplaceAll(folder, "/", "-")+"-")
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !os.IsNotExist(err) {
			os.RemoveAll(scratch)
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(scratch, name), data, 0o644); err != nil {
			os.RemoveAll(scratch)
			return nil, err
		}
	}
	env := r.Env()
	for i, e := range env {
		if v, ok := strings.CutPrefix(e, "GOFLAGS="); ok {
			// -mod=mod lets the go command add the repository's own go.sum
			// lines to the scratch copy; Tidy still reports an untidy go.mod.
			env[i] = "GOFLAGS=" + strings.TrimSpace(v+" -mod=mod -modfile="+filepath.Join(scratch, "go.mod"))
		}
	}
	return &Alone{r: r, Module: folder, dir: dir, modDir: scratch, env: env}, nil
}

// Close removes the scratch folder.
func (a *Alone) Close() error { return os.RemoveAll(a.modDir) }

// Env is the environment Run adds to the process's.
func (a *Alone) Env() []string { return a.env }

// Run runs the go command with args in the module folder, with extra
// environment entries after the Alone ones, and returns its output.
func (a *Alone) Run(extra []string, args ...string) (string, error) {
	return run(a.dir, append(append([]string{}, a.env...), extra...), "go", args...)
}

// Tidy runs `go mod tidy` on the scratch copy and reports how the module's
// committed go.mod and go.sum differ from the result, ignoring go.sum lines
// of the repository's own modules. An empty diff means tidy. With write
// set, it copies the result back instead (without those lines).
func (a *Alone) Tidy(write bool) (diff string, err error) {
	if _, err := a.Run(nil, "mod", "tidy"); err != nil {
		return "", err
	}
	var diffs []string
	for _, name := range []string{"go.mod", "go.sum"} {
		got, err := os.ReadFile(filepath.Join(a.modDir, name))
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
		if name == "go.sum" {
			got = dropInRepoSums(got)
		}
		committed, err := os.ReadFile(filepath.Join(a.dir, name))
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
		if bytes.Equal(got, committed) {
			continue
		}
		if write {
			if len(got) == 0 && name == "go.sum" {
				if err := os.Remove(filepath.Join(a.dir, name)); err != nil && !os.IsNotExist(err) {
					return "", err
				}
				continue
			}
			if err := writeFileAtomic(filepath.Join(a.dir, name), got, 0o644); err != nil {
				return "", err
			}
			continue
		}
		diffs = append(diffs, lineDiff(a.Module+"/"+name, string(committed), string(got)))
	}
	return strings.Join(diffs, "\n"), nil
}

// dropInRepoSums removes go.sum lines of the repository's own modules.
func dropInRepoSums(sum []byte) []byte {
	var out []byte
	for line := range bytes.Lines(sum) {
		if !inRepoSumLine(string(line)) {
			out = append(out, line...)
		}
	}
	return out
}

// lineDiff is a minimal diff for people: the lines only in want prefixed
// "-", the lines only in got prefixed "+".
func lineDiff(name, want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	fmt.Fprintf(&b, "%s (- committed, + tidy):\n", name)
	for _, l := range strings.Split(want, "\n") {
		if l != "" && !g[l] {
			fmt.Fprintf(&b, "-%s\n", l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if l != "" && !w[l] {
			fmt.Fprintf(&b, "+%s\n", l)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
