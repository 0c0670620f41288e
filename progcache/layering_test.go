package progcache_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// progcache stands on its own: a compile service with no device imports it
// without the driver module (or any other accelkit module) in its build
// list. go list sees every package progcache's tests and commands import.
func TestStandsWithoutDriver(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		if strings.Contains(line, "github.com/accelkit/accelkit/") && !strings.HasPrefix(line, "module ") {
			t.Errorf("go.mod requires an accelkit module: %q", line)
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-test", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/accelkit/accelkit/") && !strings.HasPrefix(p, "github.com/accelkit/accelkit/progcache") {
			t.Errorf("a progcache package imports %s", p)
		}
	}
}
