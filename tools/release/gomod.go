package release

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// ReadGoMod parses module's go.mod in repo.
func ReadGoMod(repo, module string) (*modfile.File, error) {
	path := filepath.Join(repo, module, "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return modfile.Parse(path, data, nil)
}

// folderOf returns the repository folder of an in-repo module path, or ""
// when path is not one of the repository's modules.
func folderOf(path string) string {
	if rest, ok := strings.CutPrefix(path, ModulePrefix); ok {
		return rest
	}
	return ""
}

// CheckNoReplace returns a problem for each replace directive in module's
// go.mod: Go ignores a dependency's replaces, so a released go.mod that
// needs one builds differently for its users, and `go install path@version`
// refuses it. The repository develops against itself through go.work.
func CheckNoReplace(f *modfile.File, module string) []string {
	var problems []string
	for _, rep := range f.Replace {
		old := rep.Old.Path
		if rep.Old.Version != "" {
			old += " " + rep.Old.Version
		}
		problems = append(problems, fmt.Sprintf("%s/go.mod: replace %s => %s: a released go.mod may not replace (go.work replaces in-repo modules for development); drop it with `go mod edit -dropreplace=%s`", module, old, rep.New.Path, rep.Old.Path))
	}
	return problems
}

// SetRequire rewrites module's requirement on the in-repo module dep to
// version (the release's "bump" step).
func SetRequire(repo, module, dep, version string) (bool, error) {
	f, err := ReadGoMod(repo, module)
	if err != nil {
		return false, err
	}
	for _, r := range f.Require {
		if r.Mod.Path == ModulePrefix+dep && r.Mod.Version != version {
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return false, err
			}
			data, err := f.Format()
			if err != nil {
				return false, err
			}
			return true, writeFileAtomic(filepath.Join(repo, module, "go.mod"), data, 0o644)
		}
	}
	return false, nil
}
