package release

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/mod/semver"
	"golang.org/x/tools/go/packages"
)

// APIReport is the outcome of comparing a module's exported API with its
// last tag.
type APIReport struct {
	Module, Old, New string // module folder, last tagged version, next version
	Skipped          string // why nothing was compared (no tag yet); empty otherwise
	Incompatible     []string
	Compatible       []string
	Allowed          bool   // the version change permits what changed
	Verdict          string // one line for people
}

// CompareAPI compares the exported API of module in the work tree with its
// last tag, loading both with GOWORK=off against their own go.mod (the work
// tree's through alone, so its in-repo requirements resolve through the
// rehearsal; nil loads it with the plain environment), and
// judges whether version permits the changes: an incompatible change needs
// a major bump from v1 on, and a minor bump below v1 (as gorelease rules);
// a compatible addition needs at least a minor bump.
func CompareAPI(repo, module, version string, alone *Alone) (*APIReport, error) {
	rep := &APIReport{Module: module, New: version, Allowed: true}
	last, err := LastTag(repo, module)
	if err != nil {
		return nil, err
	}
	if last == "" {
		rep.Skipped = fmt.Sprintf("no tag %s/v* yet: nothing to compare, skipped", module)
		rep.Verdict = rep.Skipped
		return rep, nil
	}
	rep.Old = last
	tmp, err := os.MkdirTemp("", "apidiff-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// The whole tree at the tag, as it was released.
	tarball := filepath.Join(tmp, "old.tar")
	if _, err := run(repo, nil, "git", "archive", "--format=tar", "-o", tarball, TagName(module, last)); err != nil {
		return nil, err
	}
	oldRoot := filepath.Join(tmp, "old")
	if err := os.Mkdir(oldRoot, 0o755); err != nil {
		return nil, err
	}
	if _, err := run(oldRoot, nil, "tar", "-xf", tarball); err != nil {
		return nil, err
	}
	f, err := ReadGoMod(repo, module)
	if err != nil {
		return nil, err
	}
	oldMod, err := loadModule(filepath.Join(oldRoot, module), f.Module.Mod.Path, []string{"GOWORK=off", "GOFLAGS=-mod=mod"})
	if err != nil {
		return nil, fmt.Errorf("loading %s at %s: %w", module, last, err)
	}
	newEnv := []string{"GOWORK=off", "GOFLAGS=-mod=mod"}
	if alone != nil {
		newEnv = alone.Env()
	}
	newMod, err := loadModule(filepath.Join(repo, module), f.Module.Mod.Path, newEnv)
	if err != nil {
		return nil, fmt.Errorf("loading %s in the work tree: %w", module, err)
	}
	r := apidiff.ModuleChanges(oldMod, newMod)
	for _, c := range r.Changes {
		if c.Compatible {
			rep.Compatible = append(rep.Compatible, c.Message)
		} else {
			rep.Incompatible = append(rep.Incompatible, c.Message)
		}
	}
	rep.judge()
	return rep, nil
}

func (rep *APIReport) judge() {
	oldMajor, newMajor := semver.Major(rep.Old), semver.Major(rep.New)
	majorBump := newMajor != oldMajor
	minorBump := majorBump || semver.MajorMinor(rep.New) != semver.MajorMinor(rep.Old)
	switch {
	case len(rep.Incompatible) > 0 && oldMajor == "v0" && !minorBump:
		rep.Allowed = false
		rep.Verdict = fmt.Sprintf("incompatible API change since %s needs at least a minor bump below v1 (next is %s):\n    %s",
			rep.Old, rep.New, strings.Join(rep.Incompatible, "\n    "))
	case len(rep.Incompatible) > 0 && oldMajor != "v0" && !majorBump:
		rep.Allowed = false
		rep.Verdict = fmt.Sprintf("incompatible API change since %s needs a major version bump (next is %s):\n    %s",
			rep.Old, rep.New, strings.Join(rep.Incompatible, "\n    "))
	case len(rep.Compatible) > 0 && !minorBump:
		rep.Allowed = false
		rep.Verdict = fmt.Sprintf("API additions since %s need a minor version bump (next is %s):\n    %s",
			rep.Old, rep.New, strings.Join(rep.Compatible, "\n    "))
	default:
		rep.Verdict = fmt.Sprintf("compatible with %s (%d incompatible, %d compatible changes)", rep.Old, len(rep.Incompatible), len(rep.Compatible))
	}
}

// loadModule type-checks the non-internal, non-main packages of the module
// in dir.
func loadModule(dir, path string, env []string) (*apidiff.Module, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes,
		Dir:  dir,
		Env:  append(os.Environ(), env...),
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	m := &apidiff.Module{Path: path}
	var errs []error
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, e)
		}
		if p.Name == "main" || strings.Contains(p.PkgPath+"/", "/internal/") || p.Types == nil {
			continue
		}
		m.Packages = append(m.Packages, p.Types)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// String formats the report for people.
func (rep *APIReport) String() string { return rep.Module + ": " + rep.Verdict }
