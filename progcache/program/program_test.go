package program_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/nvrtc"
	"github.com/accelkit/accelkit/driver/nvrtc/nvrtctest"
	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/filestream"
	"github.com/accelkit/accelkit/progcache/program"
)

// childEnv names the cache directory of the second process of
// TestSecondProcessLoadsFromCache; set, TestChildLoadsFromCache runs.
const childEnv = "ACCELKIT_PROGRAM_TEST_CHILD_DIR"

// fakeNVRTC builds the fake libnvrtc and opens it.
func fakeNVRTC(t *testing.T) (*nvrtctest.Lib, *nvrtc.Compiler) {
	t.Helper()
	lib := nvrtctest.Build(t)
	c, err := nvrtc.Open(lib.Path)
	if err != nil {
		t.Fatalf("nvrtc.Open(fake): %v", err)
	}
	return lib, c
}

func simDevice(t *testing.T) driver.Device {
	t.Helper()
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=64MiB")
	return dev
}

func fileCache(t *testing.T, dir string) *filestream.Cache {
	t.Helper()
	c, err := filestream.Open(dir, filestream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func memCache(t *testing.T) *progcache.Memory {
	t.Helper()
	c, err := progcache.NewMemory(progcache.MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func kernelSource() program.Source {
	return program.Source{Name: "kernels.cu", Code: []byte(drivertest.KernelSource)}
}

// vectorAdd launches accelkit_vector_add of p on n elements and checks c =
// a + b on the host.
func vectorAdd(t *testing.T, dev driver.Device, p *program.Program, n int) {
	t.Helper()
	k, err := p.Kernel("accelkit_vector_add")
	if err != nil {
		t.Fatal(err)
	}
	host := func(f func(i int) float32) []byte {
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f(i)))
		}
		return b
	}
	var ptrs [3]driver.Ptr
	for i := range ptrs {
		if ptrs[i], err = dev.Malloc(uint64(4 * n)); err != nil {
			t.Fatal(err)
		}
		defer dev.Free(ptrs[i])
	}
	if err := dev.CopyHtoDSync(ptrs[0], host(func(i int) float32 { return float32(i) })); err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyHtoDSync(ptrs[1], host(func(i int) float32 { return 0.5 * float32(i) })); err != nil {
		t.Fatal(err)
	}
	args := new(driver.Args).Ptr(ptrs[0]).Ptr(ptrs[1]).Ptr(ptrs[2]).Int32(int32(n))
	cfg := driver.LaunchConfig{Grid: driver.Dim3{X: uint32((n + 127) / 128)}, Block: driver.Dim3{X: 128}}
	if err := k.Launch(nil, cfg, args); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*n)
	if err := dev.CopyDtoHSync(got, ptrs[2]); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if v, want := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])), 1.5*float32(i); v != want {
			t.Fatalf("c[%d] = %v, want %v", i, v, want)
		}
	}
}

// TestLoadVectorAdd: NVRTC (the fake) compiles the reference kernels for
// the sim (PTX, as the sim runs PTX), the program is cached, loaded, and
// vector_add computes the right sums; a second Load is a hit.
func TestLoadVectorAdd(t *testing.T) {
	lib, cc := fakeNVRTC(t)
	dev := simDevice(t)
	l, err := program.New(program.Options{Device: dev, Compiler: cc, Cache: fileCache(t, t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	p, err := l.Load(ctx, kernelSource())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.FromCache() || p.Kind() != "ptx" {
		t.Errorf("first Load: FromCache %v, Kind %q; want a compiled ptx", p.FromCache(), p.Kind())
	}
	vectorAdd(t, dev, p, 1000)
	p2, err := l.Load(ctx, kernelSource())
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if !p2.FromCache() || p2.Key() != p.Key() {
		t.Errorf("second Load: FromCache %v, same key %v; want a hit on the same key", p2.FromCache(), p2.Key() == p.Key())
	}
	if n := lib.Count("nvrtcCompileProgram"); n != 1 {
		t.Errorf("nvrtcCompileProgram ran %d times, want 1", n)
	}
	vectorAdd(t, dev, p2, 257)
	if _, err := p2.Kernel("no_such_kernel"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("Kernel(no_such_kernel) = %v, want ErrNotFound", err)
	}
}

// TestSecondProcessLoadsFromCache: a second process with the same inputs
// and cache directory loads the program without compiling: its NVRTC (the
// fake, told to fail every compile) is never asked.
func TestSecondProcessLoadsFromCache(t *testing.T) {
	_, cc := fakeNVRTC(t)
	dir := t.TempDir()
	l, err := program.New(program.Options{Device: simDevice(t), Compiler: cc, Cache: fileCache(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Load(context.Background(), kernelSource())
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestChildLoadsFromCache$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, "ACCELKIT_FAKENVRTC_FAIL_COMPILE=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "child: loaded from cache") {
		t.Fatalf("second process: %v\n%s", err, out)
	}
	// The control: the same process environment fails a compile, so the
	// child's success was the cache's.
	cmd = exec.Command(exe, "-test.run=^TestChildLoadsFromCache$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.TempDir(), "ACCELKIT_FAKENVRTC_FAIL_COMPILE=1")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a second process with an empty cache and failing compiles passed:\n%s", out)
	}
}

// TestChildLoadsFromCache is the second process of
// TestSecondProcessLoadsFromCache; it skips unless that test runs it.
func TestChildLoadsFromCache(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("the second process of TestSecondProcessLoadsFromCache")
	}
	lib, cc := fakeNVRTC(t)
	dev := simDevice(t)
	l, err := program.New(program.Options{Device: dev, Compiler: cc, Cache: fileCache(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Load(context.Background(), kernelSource())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !p.FromCache() || lib.Count("nvrtcCompileProgram") != 0 {
		t.Fatalf("FromCache %v, compiles %d", p.FromCache(), lib.Count("nvrtcCompileProgram"))
	}
	vectorAdd(t, dev, p, 300)
	t.Log("child: loaded from cache")
}

// TestConcurrentLoadsCompileOnce: Loads of one program at once compile it
// once and all run.
func TestConcurrentLoadsCompileOnce(t *testing.T) {
	lib, cc := fakeNVRTC(t)
	dev := simDevice(t)
	l, err := program.New(program.Options{Device: dev, Compiler: cc, Cache: fileCache(t, t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	var compiled atomic.Int32
	progs := make([]*program.Program, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			progs[i], errs[i] = l.Load(context.Background(), kernelSource())
			if errs[i] == nil && !progs[i].FromCache() {
				compiled.Add(1)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Load %d: %v", i, err)
		}
		defer progs[i].Close()
	}
	if c := lib.Count("nvrtcCompileProgram"); c != 1 || compiled.Load() != 1 {
		t.Errorf("%d concurrent Loads: nvrtcCompileProgram ran %d times, %d Loads compiled; want 1 and 1", n, c, compiled.Load())
	}
	vectorAdd(t, dev, progs[n-1], 64)
}

// TestCorruptEntryRecompiled: a cache file damaged on disk, and an entry
// that is intact but not this key's program, are compiled again, not
// crashed on or loaded.
func TestCorruptEntryRecompiled(t *testing.T) {
	lib, cc := fakeNVRTC(t)
	dev := simDevice(t)
	ctx := context.Background()
	dir := t.TempDir()
	c := fileCache(t, dir)
	l, err := program.New(program.Options{Device: dev, Compiler: cc, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Load(ctx, kernelSource())
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	var files []string
	filepath.WalkDir(filepath.Join(dir, "entries"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, path)
		}
		return err
	})
	if len(files) != 1 {
		t.Fatalf("cache entries: %q, want one", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(files[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err = l.Load(ctx, kernelSource())
	if err != nil {
		t.Fatalf("Load over a corrupt entry: %v", err)
	}
	if p.FromCache() || lib.Count("nvrtcCompileProgram") != 2 {
		t.Errorf("Load over a corrupt entry: FromCache %v, compiles %d; want a compile (2)", p.FromCache(), lib.Count("nvrtcCompileProgram"))
	}
	vectorAdd(t, dev, p, 100)
	p.Close()

	// An intact record that is not a program: the device refuses it, so
	// it is deleted and compiled again.
	if err := c.Put(ctx, p.Key(), progcache.Object{Kind: "ptx", Name: "kernels.cu", Code: []byte("not an image")}); err != nil {
		t.Fatal(err)
	}
	p, err = l.Load(ctx, kernelSource())
	if err != nil {
		t.Fatalf("Load over a foreign entry: %v", err)
	}
	defer p.Close()
	if p.FromCache() || lib.Count("nvrtcCompileProgram") != 3 {
		t.Errorf("Load over a foreign entry: FromCache %v, compiles %d; want a compile (3)", p.FromCache(), lib.Count("nvrtcCompileProgram"))
	}
	vectorAdd(t, dev, p, 100)
}

// TestCompileErrorThroughPath: NVRTC's failure comes back as
// *nvrtc.CompileError with its log, and nothing is cached.
func TestCompileErrorThroughPath(t *testing.T) {
	_, cc := fakeNVRTC(t)
	c := fileCache(t, t.TempDir())
	l, err := program.New(program.Options{Device: simDevice(t), Compiler: cc, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Load(context.Background(), program.Source{Name: "bad.cu", Code: []byte("#error the kernel is not written yet\n")})
	var ce *nvrtc.CompileError
	if !errors.As(err, &ce) || !errors.Is(err, nvrtc.ErrCompile) || !strings.Contains(ce.Log, "the kernel is not written yet") {
		t.Fatalf("Load of a failing source = %v, want *nvrtc.CompileError with the log", err)
	}
	if n, _ := c.Len(context.Background()); n != 0 {
		t.Errorf("cache holds %d entries after a failed compile, want 0", n)
	}
}

// TestKeyProbes: the toolchain is probed into the key: another NVRTC
// version or architecture is another key, and a failed probe is a
// labelled value that makes a key of its own.
func TestKeyProbes(t *testing.T) {
	lib := nvrtctest.Build(t)
	dev := simDevice(t)
	cache := memCache(t)
	keyWith := func(c program.Compiler, dev driver.Device, src program.Source) (progcache.Key, progcache.KeyInput) {
		t.Helper()
		l, err := program.New(program.Options{Device: dev, Compiler: c, Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		k, in, err := l.Key(src)
		if err != nil {
			t.Fatal(err)
		}
		return k, in
	}
	component := func(in progcache.KeyInput, name string) string {
		for _, c := range in.Toolchain {
			if c.Name == name {
				return c.Version
			}
		}
		t.Fatalf("no %s component in %v", name, in.Toolchain)
		return ""
	}
	open := func(version string) *nvrtc.Compiler {
		t.Setenv("ACCELKIT_FAKENVRTC_VERSION", version)
		c, err := nvrtc.Open(lib.Path)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c12 := open("12.8")
	k12, in12 := keyWith(c12, dev, kernelSource())
	c13 := open("13.0")
	k13, in13 := keyWith(c13, dev, kernelSource())
	if component(in12, program.ComponentCompiler) != "12.8" || component(in13, program.ComponentCompiler) != "13.0" || k12 == k13 {
		t.Errorf("NVRTC 12.8 and 13.0: components %q, %q, same key %v; want their versions and two keys",
			component(in12, "nvrtc"), component(in13, "nvrtc"), k12 == k13)
	}
	if v := component(in13, program.ComponentDriver); v != "simulated" {
		t.Errorf("driver component on the sim = %q, want simulated", v)
	}
	if v := component(in13, program.ComponentLinker); v != "none" {
		t.Errorf("linker component = %q, want none", v)
	}
	if v := component(in13, program.ComponentAccelkit); v != program.ModuleVersion() || v == "" {
		t.Errorf("accelkit component = %q, want ModuleVersion %q", v, program.ModuleVersion())
	}
	if in13.Options.Arch == "" || !strings.HasPrefix(in13.Options.Arch, "compute_") || in13.Target != "ptx" {
		t.Errorf("sim default: arch %q target %q, want compute_XX and ptx", in13.Options.Arch, in13.Target)
	}

	src := kernelSource()
	src.Options.Arch = "compute_90"
	if k, _ := keyWith(c13, dev, src); k == k13 {
		t.Error("another architecture gave the same key")
	}

	// A device that cannot describe itself: the driver probe fails,
	// labelled, and the key is its own.
	src.Options.Arch = in13.Options.Arch
	kAnon, inAnon := keyWith(c13, launcherOnly{dev}, src)
	if v := component(inAnon, program.ComponentDriver); !strings.HasPrefix(v, "unavailable: ") {
		t.Errorf("driver probe of a device without Properties = %q, want unavailable: ...", v)
	}
	if kAnon == k13 {
		t.Error("a failed driver probe gave the key of a working one")
	}
	// A compiler that reports no version.
	kNoVer, inNoVer := keyWith(noVersion{c13}, dev, kernelSource())
	if v := component(inNoVer, program.ComponentCompiler); !strings.HasPrefix(v, "unavailable: ") || kNoVer == k13 {
		t.Errorf("compiler without a version: component %q, same key %v; want unavailable: ... and another key", v, kNoVer == k13)
	}
}

// launcherOnly is a device with the Launcher capability and nothing else
// (no Properties).
type launcherOnly struct{ driver.Device }

func (d launcherOnly) LoadModule(image []byte) (driver.Module, error) {
	l, _ := driver.AsLauncher(d.Device)
	return l.LoadModule(image)
}

// noVersion is a compiler that reports no version.
type noVersion struct{ program.Compiler }

func (noVersion) VersionString() string { return "" }

// TestDeviceWithoutLauncher: New refuses a device that cannot load
// programs, saying so.
func TestDeviceWithoutLauncher(t *testing.T) {
	_, err := program.New(program.Options{Device: plainDevice{simDevice(t)}, Compiler: noVersion{}, Cache: memCache(t)})
	if !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "Launcher") {
		t.Fatalf("New on a device without Launcher = %v, want ErrNotSupported naming driver.Launcher", err)
	}
	if _, err := program.New(program.Options{}); !errors.Is(err, driver.ErrInvalidValue) {
		t.Fatalf("New without a device = %v, want ErrInvalidValue", err)
	}
}

// plainDevice hides every capability of the device it holds.
type plainDevice struct{ driver.Device }
