// Package release is the release machinery of the accelkit monorepo, used by
// tools/cmd/release: it reads versions.yaml, rehearses a release through a
// file:// module proxy built from the work tree, builds modules alone
// (GOWORK=off) through it, checks that a module is ready to be tagged
// <module>/vX.Y.Z, compares its exported API with its last tag, keeps
// go.work's replaces and in-repo requirements at the versions.yaml
// versions, and creates tags.
//
// Released go.mod files carry no replace directive: in-repo requirements
// name released (or about to be released) versions, and go.work replaces
// each module at its next version with its folder for development.
package release

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
	"gopkg.in/yaml.v3"
)

// ModulePrefix is the path prefix of every module of the repository.
const ModulePrefix = "github.com/accelkit/accelkit/"

// Versions is the content of versions.yaml: the next version of each
// released module, and the modules that are never released.
type Versions struct {
	Modules    map[string]string `yaml:"modules"`    // module folder -> next version, e.g. driver: v0.1.0
	Unreleased []string          `yaml:"unreleased"` // module folders never tagged, e.g. tools
}

// ReadVersions reads and validates versions.yaml in repo.
func ReadVersions(repo string) (*Versions, error) {
	path := filepath.Join(repo, "versions.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v Versions
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for mod, ver := range v.Modules {
		if !semver.IsValid(ver) || semver.Canonical(ver) != ver {
			return nil, fmt.Errorf("%s: module %s: version %q is not a canonical semantic version like v0.1.0", path, mod, ver)
		}
		if slices.Contains(v.Unreleased, mod) {
			return nil, fmt.Errorf("%s: module %s is listed both with a version and as unreleased", path, mod)
		}
	}
	return &v, nil
}

// Next returns the version module is to be released at, or an error when
// the module is unreleased or unknown.
func (v *Versions) Next(module string) (string, error) {
	if slices.Contains(v.Unreleased, module) {
		return "", fmt.Errorf("module %s is never released (versions.yaml lists it under unreleased)", module)
	}
	ver, ok := v.Modules[module]
	if !ok {
		known := make([]string, 0, len(v.Modules))
		for m := range v.Modules {
			known = append(known, m)
		}
		slices.Sort(known)
		return "", fmt.Errorf("module %s is not in versions.yaml (released modules: %s)", module, strings.Join(known, ", "))
	}
	return ver, nil
}

// TagName is the git tag of module at version: "<module>/vX.Y.Z".
func TagName(module, version string) string { return module + "/" + version }

var changelogEntry = regexp.MustCompile(`(?m)^##\s+\[?v?(\d+\.\d+\.\d+[^\]\s]*)\]?`)

// ChangelogHas reports whether CHANGELOG.md text has a "## [X.Y.Z]" (or
// "## vX.Y.Z") entry for version.
func ChangelogHas(text, version string) bool {
	want := strings.TrimPrefix(version, "v")
	for _, m := range changelogEntry.FindAllStringSubmatch(text, -1) {
		if m[1] == want {
			return true
		}
	}
	return false
}
