package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type workflow struct {
	Jobs map[string]struct {
		RunsOn string `yaml:"runs-on"`
		Steps  []struct {
			Name string            `yaml:"name"`
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func readWorkflow(t *testing.T, root, name string) workflow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, ".github", "workflows", name))
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return wf
}

// TestWorkflowTestPrograms keeps the GitHub workflow's Linux legs from
// passing where .ci/run would fail or skipping where it would not: every
// Ubuntu job that runs module tests or the linters first runs
// .ci/testdeps.sh (which installs redis-server, chromium, python3, node and
// shellcheck and sets the same ACCELKIT_REQUIRE_* variables as .ci/run).
func TestWorkflowTestPrograms(t *testing.T) {
	root := repoRoot(t)
	wf := readWorkflow(t, root, "ci.yml")
	for name, job := range wf.Jobs {
		if !strings.HasPrefix(job.RunsOn, "ubuntu") {
			continue
		}
		deps := false
		for _, s := range job.Steps {
			if strings.Contains(s.Run, ".ci/testdeps.sh") {
				deps = true
			}
			tests := strings.Contains(s.Run, "cmd/release -C .. alone") || strings.Contains(s.Run, "go tool task lint") || strings.Contains(s.Run, "go tool task test")
			if tests && !deps {
				t.Errorf("ci.yml job %s runs %q before .ci/testdeps.sh: its tests would skip what .ci/run requires", name, s.Run)
			}
		}
	}
}

// TestWorkflowCachePaths: setup-go warns (and caches nothing) when
// cache-dependency-path matches no file, as `MODULE/go.sum` did for
// tfcompat, which has no dependencies and so no go.sum.
func TestWorkflowCachePaths(t *testing.T) {
	root := repoRoot(t)
	mods := workspaceModules(t, root)
	for _, file := range []string{"ci.yml", "release.yml"} {
		wf := readWorkflow(t, root, file)
		for name, job := range wf.Jobs {
			for _, s := range job.Steps {
				pat, ok := s.With["cache-dependency-path"]
				if !ok {
					continue
				}
				for _, m := range mods {
					p := strings.ReplaceAll(pat, "${{ matrix.module }}", m)
					if strings.Contains(p, "${{") {
						t.Errorf("%s job %s: cache-dependency-path %q uses an expression this test does not know", file, name, pat)
						break
					}
					if hits, _ := filepath.Glob(filepath.Join(root, p)); len(hits) == 0 {
						t.Errorf("%s job %s: cache-dependency-path %q matches no file for module %s", file, name, pat, m)
					}
				}
			}
		}
	}
}

// workspaceModules lists go.work's module folders, tools/task aside, as
// the workflow's module matrix does.
func workspaceModules(t *testing.T, root string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	inUse := false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "use ("):
			inUse = true
		case inUse && line == ")":
			inUse = false
		case inUse && strings.HasPrefix(line, "./"):
			if m := strings.TrimPrefix(line, "./"); m != "tools/task" {
				mods = append(mods, m)
			}
		}
	}
	if len(mods) == 0 {
		t.Fatal("go.work lists no modules")
	}
	return mods
}
