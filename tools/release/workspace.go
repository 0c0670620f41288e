package release

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
)

// ReadWork parses the repository's go.work.
func ReadWork(repo string) (*modfile.WorkFile, error) {
	path := filepath.Join(repo, "go.work")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return modfile.ParseWork(path, data, nil)
}

// WorkModules returns the folders go.work uses, relative to repo, sorted.
func WorkModules(repo string) ([]string, error) {
	wf, err := ReadWork(repo)
	if err != nil {
		return nil, err
	}
	var mods []string
	for _, u := range wf.Use {
		mods = append(mods, strings.TrimPrefix(filepath.ToSlash(filepath.Clean(u.Path)), "./"))
	}
	slices.Sort(mods)
	return mods, nil
}

// CheckWork returns a problem for each way go.work fails to develop the
// repository against itself: every released module must be used, and
// replaced at its versions.yaml version by its folder (in-repo
// requirements name that version, which does not exist before the tag; a
// workspace alone does not replace every version of its modules).
func CheckWork(repo string, vers *Versions) ([]string, error) {
	wf, err := ReadWork(repo)
	if err != nil {
		return nil, err
	}
	used, err := WorkModules(repo)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, m := range SortedKeys(vers.Modules) {
		if !slices.Contains(used, m) {
			problems = append(problems, fmt.Sprintf("go.work does not use ./%s (go work use ./%s)", m, m))
		}
		want := "./" + m
		found := ""
		for _, r := range wf.Replace {
			if r.Old.Path == ModulePrefix+m && r.Old.Version == vers.Modules[m] {
				found = r.New.Path
			}
		}
		if found != want {
			problems = append(problems, fmt.Sprintf("go.work: want `replace %s%s %s => %s`, have %q (run `go tool task release:bump`)", ModulePrefix, m, vers.Modules[m], want, found))
		}
	}
	for _, r := range wf.Replace {
		m := folderOf(r.Old.Path)
		if m != "" && vers.Modules[m] != r.Old.Version {
			problems = append(problems, fmt.Sprintf("go.work: replace %s %s names a version versions.yaml does not (%q); drop it (`go tool task release:bump`)", r.Old.Path, r.Old.Version, vers.Modules[m]))
		}
	}
	return problems, nil
}

// SyncWork rewrites go.work's replaces of the repository's modules to the
// versions in versions.yaml. It reports whether it changed the file.
func SyncWork(repo string, vers *Versions) (bool, error) {
	wf, err := ReadWork(repo)
	if err != nil {
		return false, err
	}
	before := modfile.Format(wf.Syntax)
	for _, r := range slices.Clone(wf.Replace) {
		if folderOf(r.Old.Path) != "" {
			if err := wf.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return false, err
			}
		}
	}
	for _, m := range SortedKeys(vers.Modules) {
		if err := wf.AddReplace(ModulePrefix+m, vers.Modules[m], "./"+m, ""); err != nil {
			return false, err
		}
	}
	wf.Cleanup()
	after := modfile.Format(wf.Syntax)
	if string(after) == string(before) {
		return false, nil
	}
	return true, writeFileAtomic(filepath.Join(repo, "go.work"), after, 0o644)
}

// DepDiff is a module whose version differs between the workspace and one
// module built alone.
type DepDiff struct {
	Module        string // workspace module folder
	Path          string // the dependency
	Alone, InWork string // its versions
	RaisedBy      []string
}

func (d DepDiff) String() string {
	s := fmt.Sprintf("%s: %s is %s alone but %s in the workspace", d.Module, d.Path, d.Alone, d.InWork)
	if len(d.RaisedBy) > 0 {
		s += " (required at " + d.InWork + " by " + strings.Join(d.RaisedBy, ", ") + ")"
	}
	return s
}

// CompareWorkspace lists, for each module go.work uses, the dependencies
// whose version differs between the module's build in the workspace and
// its build alone (GOWORK=off, through the rehearsal). It compares the
// modules that provide packages to `go list -deps -test ./...`, the code
// that is compiled and tested, not the whole module graph: a difference
// there means the workspace tests code its users never get.
func (r *Rehearsal) CompareWorkspace() ([]DepDiff, error) {
	mods, err := WorkModules(r.Repo)
	if err != nil {
		return nil, err
	}
	work, err := filepath.Abs(filepath.Join(r.Repo, "go.work"))
	if err != nil {
		return nil, err
	}
	args := []string{"list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}", "./..."}
	requires := map[string]map[string]string{} // folder -> path -> version in its go.mod
	for _, m := range mods {
		f, err := ReadGoMod(r.Repo, m)
		if err != nil {
			return nil, err
		}
		requires[m] = map[string]string{}
		for _, req := range f.Require {
			requires[m][req.Mod.Path] = req.Mod.Version
		}
	}
	// The workspace selects one version of each module for every build in
	// it, so its build list answers for all modules at once.
	out, err := run(r.Repo, []string{"GOWORK=" + work, "GOFLAGS=-mod=readonly"}, "go", "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	if err != nil {
		return nil, fmt.Errorf("the workspace's build list: %w", err)
	}
	inWork := parseModList(out)
	var diffs []DepDiff
	for _, m := range mods {
		a, err := r.Alone(m)
		if err != nil {
			return nil, err
		}
		out, err := a.Run(nil, args...)
		a.Close()
		if err != nil {
			return nil, fmt.Errorf("%s alone: %w", m, err)
		}
		alone := parseModList(out)
		for _, p := range SortedKeys(alone) {
			if folderOf(p) != "" || alone[p] == "" {
				continue
			}
			if w, ok := inWork[p]; ok && w != alone[p] {
				d := DepDiff{Module: m, Path: p, Alone: alone[p], InWork: w}
				for _, o := range mods {
					if requires[o][p] == w {
						d.RaisedBy = append(d.RaisedBy, o)
					}
				}
				diffs = append(diffs, d)
			}
		}
	}
	return diffs, nil
}

func parseModList(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if p, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			m[p] = v
		} else if line != "" {
			m[strings.TrimSpace(line)] = ""
		}
	}
	return m
}

// SortedKeys returns m's keys in order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
