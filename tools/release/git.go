package release

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/mod/semver"
)

// run runs name with args in dir and returns its combined output; env
// entries are added to the process environment.
func run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Tags returns the versions module was tagged at, in semver order.
func Tags(repo, module string) ([]string, error) {
	out, err := run(repo, nil, "git", "tag", "--list", module+"/v*")
	if err != nil {
		return nil, err
	}
	var vers []string
	for _, t := range strings.Fields(out) {
		v := strings.TrimPrefix(t, module+"/")
		if semver.IsValid(v) {
			vers = append(vers, v)
		}
	}
	semver.Sort(vers)
	return vers, nil
}

// LastTag returns module's highest tagged version, or "" when it has none.
func LastTag(repo, module string) (string, error) {
	vers, err := Tags(repo, module)
	if err != nil || len(vers) == 0 {
		return "", err
	}
	return vers[len(vers)-1], nil
}

// dirty returns `git status --porcelain` output: empty when the tree is clean.
func dirty(repo string) (string, error) {
	out, err := run(repo, nil, "git", "status", "--porcelain", "--untracked-files=normal")
	return strings.TrimSpace(out), err
}
