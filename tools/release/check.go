package release

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Options tune Check and Tag.
type Options struct {
	// SkipTests skips running the module's tests (for dry runs that only
	// want the metadata checks).
	SkipTests bool
	// SkipAPI skips the API compatibility comparison with the last tag.
	SkipAPI bool
	// Rehearsal resolves in-repo requirements for the GOWORK=off steps;
	// Check and Tag build one (in RehearsalDir) when it is nil.
	Rehearsal *Rehearsal
	// RehearsalDir is where that rehearsal lives ("" for the default).
	RehearsalDir string
	// Pending are tags to be created earlier in the same run, as
	// module -> version: a requirement on one of them counts as released.
	Pending map[string]string
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// CheckError lists every reason a module is not ready to release.
type CheckError struct {
	Module   string
	Version  string
	Problems []string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("%s %s is not ready to release:\n  - %s", e.Module, e.Version, strings.Join(e.Problems, "\n  - "))
}

// Check verifies that module is ready to be tagged at its versions.yaml
// version: the work tree is clean, its go.mod has no replace directive,
// `go mod tidy` is a no-op and its tests pass on its own go.mod (GOWORK=off,
// in-repo requirements through the rehearsal proxy), its zip carries a
// license, its CHANGELOG has the entry, its in-repo requirements name
// released (or pending) versions, the tag does not exist yet, and its
// exported API is compatible with its last tag unless the version says
// otherwise. It returns the version, and a *CheckError listing every
// problem found.
func Check(repo, module string, opts Options) (string, error) {
	if opts.Rehearsal == nil {
		r, err := NewRehearsal(repo, opts.RehearsalDir)
		if err != nil {
			return "", err
		}
		defer r.Close()
		opts.Rehearsal = r
	}
	vers, err := ReadVersions(repo)
	if err != nil {
		return "", err
	}
	version, err := vers.Next(module)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(repo, module)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("module %s: no go.mod in %s", module, dir)
	}
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if d, err := dirty(repo); err != nil {
		return "", err
	} else if d != "" {
		add("work tree is not clean (commit or stash first):\n%s", d)
	}
	tags, err := Tags(repo, module)
	if err != nil {
		return "", err
	}
	if slices.Contains(tags, version) {
		add("tag %s already exists; raise the version in versions.yaml", TagName(module, version))
	}
	if data, err := os.ReadFile(filepath.Join(dir, "CHANGELOG.md")); err != nil {
		add("no CHANGELOG.md: %v", err)
	} else if !ChangelogHas(string(data), version) {
		add("CHANGELOG.md has no entry for %s (add a \"## [%s]\" section)", version, strings.TrimPrefix(version, "v"))
	}
	f, err := ReadGoMod(repo, module)
	if err != nil {
		return "", err
	}
	for _, r := range f.Require {
		dep := folderOf(r.Mod.Path)
		if dep == "" {
			continue
		}
		depTags, err := Tags(repo, dep)
		if err != nil {
			return "", err
		}
		if !slices.Contains(depTags, r.Mod.Version) && opts.Pending[dep] != r.Mod.Version {
			add("requires %s %s, which is not released: tag %s first (in this run or before) and require its version (`go tool task release:bump`)",
				r.Mod.Path, r.Mod.Version, dep)
		}
	}
	problems = append(problems, CheckNoReplace(f, module)...)
	if err := CheckVCSLicense(repo, module, "HEAD"); err != nil {
		add("%v", err)
	}

	alone, err := opts.Rehearsal.Alone(module)
	if err != nil {
		return "", err
	}
	defer alone.Close()
	opts.logf("%s: go mod tidy (GOWORK=off)", module)
	if diff, err := alone.Tidy(false); err != nil {
		add("go mod tidy fails: %v", err)
	} else if diff != "" {
		add("go mod tidy is not a no-op (run `go tool task tidy`):\n%s", diff)
	}
	if !opts.SkipTests {
		opts.logf("%s: go test ./... (GOWORK=off)", module)
		if out, err := alone.Run(nil, "test", "-count=1", "./..."); err != nil {
			add("tests fail:\n%s", strings.TrimSpace(out))
		}
	}
	if !opts.SkipAPI {
		rep, err := CompareAPI(repo, module, version, alone)
		switch {
		case err != nil:
			add("api comparison failed: %v", err)
		case rep.Skipped != "":
			opts.logf("%s: api: %s", module, rep.Skipped)
		case !rep.Allowed:
			add("%s", rep.Verdict)
		default:
			opts.logf("%s: api: %s", module, rep.Verdict)
		}
	}
	if len(problems) > 0 {
		return version, &CheckError{Module: module, Version: version, Problems: problems}
	}
	return version, nil
}

// Order sorts modules so that each comes after the in-repo modules it
// requires, so one run can tag a module and then its dependents.
func Order(repo string, modules []string) ([]string, error) {
	deps := map[string][]string{}
	for _, m := range modules {
		f, err := ReadGoMod(repo, m)
		if err != nil {
			return nil, err
		}
		for _, r := range f.Require {
			if d := folderOf(r.Mod.Path); d != "" {
				deps[m] = append(deps[m], d)
			}
		}
	}
	var out []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(m string) error
	visit = func(m string) error {
		switch state[m] {
		case 1:
			return fmt.Errorf("requirement cycle through %s", m)
		case 2:
			return nil
		}
		state[m] = 1
		for _, d := range deps[m] {
			if slices.Contains(modules, d) {
				if err := visit(d); err != nil {
					return err
				}
			}
		}
		state[m] = 2
		out = append(out, m)
		return nil
	}
	for _, m := range modules {
		if err := visit(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Tag checks each module (in dependency order) and, when create is set,
// creates its tag; otherwise it only reports the tags it would create. A
// module's check counts the tags planned before it in the run as released.
func Tag(repo string, modules []string, create bool, opts Options) ([]string, error) {
	ordered, err := Order(repo, modules)
	if err != nil {
		return nil, err
	}
	if opts.Pending == nil {
		opts.Pending = map[string]string{}
	}
	if opts.Rehearsal == nil {
		r, err := NewRehearsal(repo, opts.RehearsalDir)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		opts.Rehearsal = r
	}
	var tags []string
	for _, m := range ordered {
		version, err := Check(repo, m, opts)
		if err != nil {
			return tags, err
		}
		tag := TagName(m, version)
		if create {
			if _, err := run(repo, nil, "git", "tag", "-a", tag, "-m", m+" "+version); err != nil {
				return tags, err
			}
		}
		opts.Pending[m] = version
		tags = append(tags, tag)
	}
	return tags, nil
}
