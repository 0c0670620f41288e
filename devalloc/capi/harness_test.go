package capi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver/cuda/cudatest"
)

// built is the library and the C harness, built once per test binary
// into a directory TestMain removes.
var built struct {
	once    sync.Once
	dir     string
	lib     string // libaccelkit_alloc.so
	harness string // the C harness, linked against lib
	skip    string
	err     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildLibrary builds the library with go build -buildmode=c-shared and
// the C harness with the C compiler. The library is never built with
// -race: ThreadSanitizer cannot map its shadow memory from a library
// loaded into a process it did not start (the harness, python3); the
// in-process tests (lib_test.go) race-test the Go side instead.
func buildLibrary(t *testing.T) (lib, harness string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the library is built and loaded on linux only")
	}
	built.once.Do(func() {
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "gcc"
		}
		if _, err := exec.LookPath(cc); err != nil {
			built.skip = fmt.Sprintf("no C compiler (%s) to build the harness: %v", cc, err)
			return
		}
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if built.dir, built.err = os.MkdirTemp("", "capi-"); built.err != nil {
			return
		}
		built.lib = filepath.Join(built.dir, "libaccelkit_alloc.so")
		args := []string{"build", "-buildmode=c-shared", "-o", built.lib}
		cmd := exec.Command(gobin, append(args, "./cmd/accelkit_alloc")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		built.harness = filepath.Join(built.dir, "harness")
		out, err := exec.Command(cc, "-O2", "-Wall", "-Wextra", "-Werror", "-Icmd/accelkit_alloc", "-o", built.harness, "testdata/harness.c",
			"-L"+built.dir, "-laccelkit_alloc", "-Wl,-rpath,"+built.dir, "-ldl", "-lpthread").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("compiling testdata/harness.c: %v\n%s", err, out)
		}
	})
	if built.skip != "" {
		t.Skip(built.skip)
	}
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.lib, built.harness
}

// run runs the harness with the fake libcuda and env, and returns its
// output; it fails t when the harness fails.
func run(t *testing.T, env []string, args ...string) string {
	t.Helper()
	_, harness := buildLibrary(t)
	fake := cudatest.Build(t)
	cmd := exec.Command(harness, args...)
	cmd.Env = append(os.Environ(), append([]string{"ACCELKIT_LIBCUDA=" + fake.Path, "ACCELKIT_ALLOC_CONF=", "GORACE=halt_on_error=1"}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok\n") {
		t.Fatalf("harness %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestCThreads: several pthreads allocate and free at once, each on its
// own stream, the legacy and the per-thread default stream; no block is
// handed to two threads at once, every byte comes back, and no stream the
// caller owns is destroyed.
func TestCThreads(t *testing.T) {
	run(t, nil, "threads", "6", "300")
}

// TestCBadCalls: an unknown or interior pointer, a wrong size, another
// device, a device that does not exist, an unknown stream and a double
// free set the last error and change nothing; a successful call clears it.
func TestCBadCalls(t *testing.T) { run(t, nil, "bad") }

// TestCOutOfMemory: a request the device cannot hold, even after the
// cache is released, returns NULL with the error, and live memory stays.
func TestCOutOfMemory(t *testing.T) {
	run(t, []string{cudatest.EnvCapacityMiB + "=64"}, "oom")
}

// TestCBadConfig: a configuration error is every call's error, never a
// crash.
func TestCBadConfig(t *testing.T) {
	_, harness := buildLibrary(t)
	fake := cudatest.Build(t)
	cmd := exec.Command(harness, "bad")
	cmd.Env = append(os.Environ(), "ACCELKIT_LIBCUDA="+fake.Path, "ACCELKIT_ALLOC_CONF=max_split_size_mb:banana")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "max_split_size_mb") {
		t.Fatalf("harness with a bad ACCELKIT_ALLOC_CONF: %v\n%s\nwant a failure naming max_split_size_mb", err, out)
	}
}

// TestCFirstCallOnNewThread measures what the first call from a thread Go
// did not start costs (the Go runtime binds an M to the thread, and the
// shim makes the primary context current there) against later calls on
// the same thread. On the fake libcuda: the figure is the library's own
// overhead, not a GPU driver's.
func TestCFirstCallOnNewThread(t *testing.T) {
	out := run(t, nil, "firstcall", "20")
	t.Logf("fake libcuda, %s", strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(out), "ok")))
}

// TestPythonHarness makes the calls through ctypes exactly as PyTorch's
// CUDAPluggableAllocator and CuPy's CFunctionAllocator make them, over a
// GPT training loop's tensor sizes, then checks the statistics, bad
// calls, empty_cache, the memory fraction and the snapshot pickle.
func TestPythonHarness(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("ACCELKIT_REQUIRE_PYTHON") != "" {
			t.Fatal("ACCELKIT_REQUIRE_PYTHON is set but no python3 is installed")
		}
		t.Skip("python3 not found in PATH: install it (Debian/Ubuntu: apt-get install python3) to run the ctypes harness")
	}
	lib, _ := buildLibrary(t)
	fake := cudatest.Build(t)
	snap := filepath.Join(t.TempDir(), "snapshot.pickle")
	cmd := exec.Command(py, "testdata/harness.py", lib, snap)
	cmd.Env = append(os.Environ(), "ACCELKIT_LIBCUDA="+fake.Path, "ACCELKIT_ALLOC_CONF=", "GORACE=halt_on_error=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("python3 testdata/harness.py: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
