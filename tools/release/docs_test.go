package release

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// repoRoot is the accelkit repository holding this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "Taskfile.yml")); err != nil {
		t.Skipf("not in the accelkit repository: %v", err)
	}
	return root
}

// TestTaskDocs keeps CONTRIBUTING's task table equal to the tasks `go tool
// task --list` shows (those with a desc), and every `go tool task NAME` in
// the docs and CI scripts naming a task that exists.
func TestTaskDocs(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "Taskfile.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tasks map[string]struct {
			Desc string `yaml:"desc"`
		} `yaml:"tasks"`
	}
	if err := yaml.Unmarshal(data, &tf); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for name, task := range tf.Tasks {
		if task.Desc != "" {
			listed = append(listed, name)
		}
	}
	slices.Sort(listed)

	contributing, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	inTasks := false
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	for _, line := range strings.Split(string(contributing), "\n") {
		if strings.HasPrefix(line, "## ") {
			inTasks = line == "## Everyday tasks"
		}
		if m := row.FindStringSubmatch(line); inTasks && m != nil {
			table = append(table, m[1])
		}
	}
	slices.Sort(table)
	if !slices.Equal(table, listed) {
		t.Errorf("CONTRIBUTING.md's task table %q differs from the Taskfile's listed tasks %q", table, listed)
	}

	use := regexp.MustCompile(`go tool task ([a-z][a-z:-]*)`)
	for _, doc := range []string{"README.md", "CONTRIBUTING.md", ".ci/run", ".github/workflows/ci.yml", ".github/workflows/release.yml"} {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range use.FindAllStringSubmatch(string(data), -1) {
			if _, ok := tf.Tasks[m[1]]; !ok {
				t.Errorf("%s runs `go tool task %s`, which is no task (tasks: %s)", doc, m[1], strings.Join(listed, ", "))
			}
		}
	}
}
