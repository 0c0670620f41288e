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

// relReplace is the replace target module's go.mod must use for dep: the
// relative path from module's folder to dep's folder.
func relReplace(module, dep string) string {
	rel, err := filepath.Rel(filepath.FromSlash(module), filepath.FromSlash(dep))
	if err != nil {
		return ""
	}
	rel = filepath.ToSlash(rel)
	if !strings.HasPrefix(rel, ".") {
		rel = "./" + rel
	}
	return rel
}

// SyncReplaces makes module's go.mod carry, for each in-repo requirement, a
// replace directive pointing at that module's folder, and drops replaces of
// in-repo modules it no longer requires. It reports whether it changed the
// file.
func SyncReplaces(repo, module string) (bool, error) {
	f, err := ReadGoMod(repo, module)
	if err != nil {
		return false, err
	}
	changed := false
	required := map[string]bool{}
	for _, r := range f.Require {
		dep := folderOf(r.Mod.Path)
		if dep == "" {
			continue
		}
		required[r.Mod.Path] = true
		want := relReplace(module, dep)
		ok := false
		for _, rep := range f.Replace {
			if rep.Old.Path == r.Mod.Path && rep.New.Path == want && rep.Old.Version == "" {
				ok = true
			}
		}
		if !ok {
			if err := f.DropReplace(r.Mod.Path, ""); err != nil {
				return false, err
			}
			if err := f.AddReplace(r.Mod.Path, "", want, ""); err != nil {
				return false, err
			}
			changed = true
		}
	}
	for _, rep := range f.Replace {
		if folderOf(rep.Old.Path) != "" && !required[rep.Old.Path] {
			if err := f.DropReplace(rep.Old.Path, rep.Old.Version); err != nil {
				return false, err
			}
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	f.Cleanup()
	data, err := f.Format()
	if err != nil {
		return false, err
	}
	return true, writeFileAtomic(filepath.Join(repo, module, "go.mod"), data, 0o644)
}

// CheckReplaces returns a problem for each in-repo requirement of module
// whose replace directive is missing or does not point at its folder.
func CheckReplaces(f *modfile.File, module string) []string {
	var problems []string
	for _, r := range f.Require {
		dep := folderOf(r.Mod.Path)
		if dep == "" {
			continue
		}
		want := relReplace(module, dep)
		found := ""
		for _, rep := range f.Replace {
			if rep.Old.Path == r.Mod.Path {
				found = rep.New.Path
			}
		}
		if found != want {
			problems = append(problems, fmt.Sprintf("go.mod: replace %s => %q, want => %s (run `go tool task replaces`)", r.Mod.Path, found, want))
		}
	}
	return problems
}

// SetRequire rewrites module's requirement on the in-repo module dep to
// version (the release's "bump" step; the replace stays).
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

// writeFileAtomic replaces path with data: a temporary file in the same
// directory, written, synced and renamed over path, so a failure or a crash
// leaves the old go.mod whole, never a truncated one.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
