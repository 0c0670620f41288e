//go:build linux && cgo

package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// The cuLibrary* loader of CUDA 12.0 and its parameter info (12.4), left
// out of a fake to test the cuModule* fallback.
var libraryLoader = []string{"cuLibraryLoadData", "cuLibraryGetKernel", "cuLibraryUnload", "cuKernelGetParamInfo"}

// launcher returns device i's launch capability, failing t when it is not
// offered.
func launcher(t testing.TB, drv *cudaDriver, i int) driver.Launcher {
	t.Helper()
	d := drv.devs[i]
	l, ok := driver.AsLauncher(d.state.Public)
	if !ok || !d.launcher {
		t.Fatalf("device %d offers no launcher (AsLauncher %v): %s", i, ok, d.launchWhy)
	}
	return l
}

func loadKernels(t testing.TB, l driver.Launcher, image string) driver.Module {
	t.Helper()
	m, err := l.LoadModule([]byte(image))
	if err != nil {
		t.Fatalf("LoadModule: %v", err)
	}
	t.Cleanup(func() { m.Unload() })
	return m
}

func kernelOf(t testing.TB, m driver.Module, name string) driver.Kernel {
	t.Helper()
	k, err := m.Kernel(name)
	if err != nil {
		t.Fatalf("Kernel(%s): %v", name, err)
	}
	return k
}

func floatBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func bytesFloat(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// upload copies v to a new allocation of d.
func upload(t testing.TB, d driver.Device, v []float32) driver.Ptr {
	t.Helper()
	p, err := d.Malloc(uint64(4 * len(v)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Free(p) })
	if err := d.CopyHtoDSync(p, floatBytes(v)); err != nil {
		t.Fatal(err)
	}
	return p
}

func download(t testing.TB, d driver.Device, p driver.Ptr, n int) []float32 {
	t.Helper()
	b := make([]byte, 4*n)
	if err := d.CopyDtoHSync(b, p); err != nil {
		t.Fatal(err)
	}
	return bytesFloat(b)
}

// grid1D covers n elements with blocks of 256 threads.
func grid1D(n int) driver.LaunchConfig {
	return driver.LaunchConfig{Grid: driver.Dim3{X: uint32((n + 255) / 256)}, Block: driver.Dim3{X: 256}}
}

func mustArgs(t testing.TB, vals ...any) *driver.Args {
	t.Helper()
	a, err := driver.ArgsOf(vals...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkKernels runs the reference kernels on device 0 of drv and checks
// their results against the host: vector add, scale in place, a reduction,
// and the three in stream order on one stream with async copies.
func checkKernels(t *testing.T, drv *cudaDriver) {
	d := drv.devs[0]
	m := loadKernels(t, launcher(t, drv, 0), drivertest.KernelPTX)
	add, scale, sum := kernelOf(t, m, drivertest.KernelVectorAdd), kernelOf(t, m, drivertest.KernelScale), kernelOf(t, m, drivertest.KernelReduceSum)
	if params, ok := add.Params(); !ok || !slices.Equal(params, []driver.Param{{Offset: 0, Size: 8}, {Offset: 8, Size: 8}, {Offset: 16, Size: 8}, {Offset: 24, Size: 4}}) {
		t.Errorf("vector add Params = %v, %v; want offsets 0, 8, 16, 24 and sizes 8, 8, 8, 4", params, ok)
	}
	if params, ok := scale.Params(); !ok || !slices.Equal(params, []driver.Param{{Offset: 0, Size: 8}, {Offset: 8, Size: 4}, {Offset: 12, Size: 4}}) {
		t.Errorf("scale Params = %v, %v", params, ok)
	}

	const n = 1000 // not a multiple of the block: the bound check matters
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i], b[i] = float32(i), float32(2*i+1)
	}
	pa, pb, pc := upload(t, d, a), upload(t, d, b), upload(t, d, make([]float32, n+8))
	if err := add.Launch(nil, grid1D(n), mustArgs(t, pa, pb, pc, int32(n))); err != nil {
		t.Fatal(err)
	}
	got := download(t, d, pc, n+8)
	for i := range n {
		if got[i] != a[i]+b[i] {
			t.Fatalf("vector add c[%d] = %v; want %v", i, got[i], a[i]+b[i])
		}
	}
	for i := n; i < n+8; i++ {
		if got[i] != 0 {
			t.Fatalf("vector add wrote c[%d] = %v past n", i, got[i])
		}
	}

	if err := scale.Launch(nil, grid1D(n), mustArgs(t, pa, float32(-0.5), int32(n))); err != nil {
		t.Fatal(err)
	}
	for i, v := range download(t, d, pa, n) {
		if v != a[i]*-0.5 {
			t.Fatalf("scale x[%d] = %v; want %v", i, v, a[i]*-0.5)
		}
	}

	out := upload(t, d, []float32{0})
	if err := sum.Launch(nil, grid1D(n), mustArgs(t, pb, out, int32(n))); err != nil {
		t.Fatal(err)
	}
	var want float32
	for _, v := range b { // integers: exact in any order
		want += v
	}
	if got := download(t, d, out, 1)[0]; got != want {
		t.Errorf("reduce sum = %v; want %v", got, want)
	}

	// Stream order: an async copy in, add, scale, an async copy out, one
	// synchronisation at the end.
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	host, err := d.HostAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.HostFree(host)
	copy(host.Bytes(), floatBytes(b))
	steps := []func() error{
		func() error { return d.CopyHtoD(pa, host.Bytes(), s) },
		func() error { return add.Launch(s, grid1D(n), mustArgs(t, pa, pa, pc, int32(n))) },
		func() error { return scale.Launch(s, grid1D(n), mustArgs(t, pc, float32(3), int32(n))) },
		func() error { return d.CopyDtoH(host.Bytes(), pc, s) },
		s.Synchronize,
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("stream step %d: %v", i, err)
		}
	}
	for i, v := range bytesFloat(host.Bytes()) {
		if want := (b[i] + b[i]) * 3; v != want {
			t.Fatalf("in stream order, element %d = %v; want %v", i, v, want)
		}
	}
}

func TestLaunchLibraryFake(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	checkKernels(t, drv)
	if n := l.Counter("cuLibraryLoadData"); n != 1 {
		t.Errorf("cuLibraryLoadData called %d times; want 1 (the CUDA 12 loader when the driver has it)", n)
	}
	if n := l.Counter("cuModuleLoadDataEx"); n != 0 {
		t.Errorf("cuModuleLoadDataEx called %d times; want 0", n)
	}
	if lib, mod := l.Counter("launch_library_kernel"), l.Counter("launch_module_function"); lib != 5 || mod != 0 {
		t.Errorf("launches: %d of library kernels, %d of module functions; want 5 and 0", lib, mod)
	}
	p, err := drv.devs[0].Properties()
	if err != nil {
		t.Fatal(err)
	}
	if p.Attributes["launcher"] != "true" || p.Attributes["loader"] != "cuLibraryLoadData" {
		t.Errorf("Properties attributes %v; want launcher true, loader cuLibraryLoadData", p.Attributes)
	}
	if n := l.Counter("ctx_mismatch"); n != 0 {
		t.Errorf("%d operations ran with another context current", n)
	}
}

func TestLaunchModuleFallbackFake(t *testing.T) {
	l := buildFake(t, nil, libraryLoader...)
	drv := openFake(t, l)
	checkKernels(t, drv)
	if n := l.Counter("cuModuleLoadDataEx"); n != 1 {
		t.Errorf("cuModuleLoadDataEx called %d times; want 1 (the fallback without cuLibraryLoadData)", n)
	}
	if lib, mod := l.Counter("launch_library_kernel"), l.Counter("launch_module_function"); lib != 0 || mod != 5 {
		t.Errorf("launches: %d of library kernels, %d of module functions; want 0 and 5", lib, mod)
	}
	if n := l.Counter("cuFuncGetParamInfo"); n == 0 {
		t.Error("the module path did not ask cuFuncGetParamInfo for the parameters")
	}
	p, _ := drv.devs[0].Properties()
	if p.Attributes["loader"] != "cuModuleLoadDataEx" {
		t.Errorf("loader attribute %q; want cuModuleLoadDataEx", p.Attributes["loader"])
	}
}

// TestLaunchWithoutParamInfo: a driver before CUDA 12.4 has no parameter
// info; Params says so and launches go unchecked, as cuLaunchKernel's.
func TestLaunchWithoutParamInfo(t *testing.T) {
	for _, omit := range [][]string{{"cuKernelGetParamInfo"}, append(slices.Clone(libraryLoader), "cuFuncGetParamInfo")} {
		t.Run(omit[0], func(t *testing.T) {
			l := buildFake(t, nil, omit...)
			drv := openFake(t, l)
			d := drv.devs[0]
			m := loadKernels(t, launcher(t, drv, 0), drivertest.KernelPTX)
			k := kernelOf(t, m, drivertest.KernelScale)
			if params, ok := k.Params(); ok || params != nil {
				t.Errorf("Params = %v, %v; want none, false", params, ok)
			}
			x := upload(t, d, []float32{1, 2, 3})
			if err := k.Launch(nil, grid1D(3), mustArgs(t, x, float32(2), int32(3))); err != nil {
				t.Fatal(err)
			}
			if got := download(t, d, x, 3); !slices.Equal(got, []float32{2, 4, 6}) {
				t.Errorf("scaled %v; want [2 4 6]", got)
			}
			// Unchecked: more arguments than the kernel has reach the driver,
			// which reads the parameters it knows (as CUDA does).
			if err := k.Launch(nil, grid1D(3), mustArgs(t, x, float32(2), int32(3), int32(99))); err != nil {
				t.Errorf("unchecked launch with an extra argument: %v", err)
			}
			args := new(driver.Args)
			for range maxParams + 1 {
				args.Int32(0)
			}
			if err := k.Launch(nil, grid1D(3), args); !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), fmt.Sprint(maxParams)) {
				t.Errorf("launch with %d arguments = %v; want ErrInvalidValue naming the limit %d", maxParams+1, err, maxParams)
			}
		})
	}
}

func TestLaunchMissingSymbols(t *testing.T) {
	for _, tc := range []struct {
		omit []string
		why  string
	}{
		{[]string{"cuLaunchKernel"}, "cuLaunchKernel"},
		{append(slices.Clone(libraryLoader), "cuModuleLoadDataEx"), "neither"},
		{append(slices.Clone(libraryLoader), "cuModuleUnload"), "neither"},
	} {
		t.Run(strings.Join(tc.omit, "+"), func(t *testing.T) {
			l := buildFake(t, nil, tc.omit...)
			drv := openFake(t, l)
			d := drv.devs[0]
			if _, ok := driver.AsLauncher(d.state.Public); ok || d.launcher {
				t.Fatal("launcher offered without the entry points it needs")
			}
			p, err := d.Properties()
			if err != nil {
				t.Fatal(err)
			}
			if p.Attributes["launcher"] != "false" || !strings.Contains(p.Attributes["launcher_off_because"], tc.why) {
				t.Errorf("attributes %v; want launcher false and a reason naming %q", p.Attributes, tc.why)
			}
		})
	}
}

func TestLoadModuleBadImage(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	ld := launcher(t, drv, 0)
	header := ".version 7.0\n.target sm_50\n.address_size 64\n"
	tests := []struct {
		name, image string
		code        int    // 0: refused before the driver
		log         string // in the error, from the JIT log
	}{
		{"empty", "", 0, ""},
		{"junk", "hello, world", 0, ""},
		{"nul inside", ".version 7.0\x00junk", 0, ""},
		{"bad params", header + ".visible .entry k(\n.param .u64 a,\n.param .bogus b\n)\n{ ret; }\n", errInvalidPTX, "line 6; error   : syntax error in the parameter list of k"},
		{"no version", ".entry k()\n{ ret; }\n", errInvalidPTX, "no .version directive"},
		{"newer ISA", ".version 99.1\n.target sm_50\n.visible .entry k() { ret; }\n", errUnsupportedPTXVersion, "Unsupported .version 99.1"},
		{"newer target", ".version 7.0\n.target sm_120\n.visible .entry k() { ret; }\n", errInvalidPTX, "higher than the device's"},
		{"other ELF", "\x7fELF\x02\x01\x01junk", errInvalidImage, "not a fake cubin"},
		{"cubin of another GPU", "\x7fELFACCELKIT-FAKE-CUBIN sm_80\n" + drivertest.KernelPTX, errNoBinaryForGPU, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := l.Counter("cuLibraryLoadData")
			m, err := ld.LoadModule([]byte(tc.image))
			if err == nil {
				m.Unload()
				t.Fatal("LoadModule succeeded")
			}
			if !errors.Is(err, driver.ErrInvalidImage) {
				t.Fatalf("LoadModule = %v; want ErrInvalidImage", err)
			}
			calls := l.Counter("cuLibraryLoadData") - before
			var e *driver.Error
			switch {
			case tc.code == 0:
				if calls != 0 || !strings.Contains(err.Error(), "PTX text, a cubin (ELF) or a fatbin") {
					t.Errorf("LoadModule = %v after %d driver calls; want a refusal naming the valid kinds before the driver", err, calls)
				}
			case !errors.As(err, &e) || e.Code != tc.code:
				t.Errorf("LoadModule = %v; want CUresult %d", err, tc.code)
			case tc.log != "" && !strings.Contains(e.Detail, "JIT log: ") || !strings.Contains(err.Error(), tc.log):
				t.Errorf("LoadModule = %v; want the JIT log with %q", err, tc.log)
			}
		})
	}
	// None of that poisons the device, and a good cubin loads.
	m := loadKernels(t, ld, "\x7fELFACCELKIT-FAKE-CUBIN sm_90\n"+drivertest.KernelPTX)
	d := drv.devs[0]
	x := upload(t, d, []float32{1, 2})
	if err := kernelOf(t, m, drivertest.KernelScale).Launch(nil, grid1D(2), mustArgs(t, x, float32(10), int32(2))); err != nil {
		t.Fatal(err)
	}
	if got := download(t, d, x, 2); !slices.Equal(got, []float32{10, 20}) {
		t.Errorf("cubin's scale gave %v; want [10 20]", got)
	}
}

func TestKernelNotFound(t *testing.T) {
	for _, omit := range [][]string{nil, libraryLoader} {
		t.Run(fmt.Sprint(len(omit) == 0), func(t *testing.T) {
			drv := openFake(t, buildFake(t, nil, omit...))
			m := loadKernels(t, launcher(t, drv, 0), drivertest.KernelPTX)
			_, err := m.Kernel("accelkit_missing")
			var e *driver.Error
			if !errors.Is(err, driver.ErrNotFound) || !errors.As(err, &e) || e.Code != errNotFound || !strings.Contains(err.Error(), "accelkit_missing") {
				t.Errorf("Kernel(accelkit_missing) = %v; want ErrNotFound (CUDA_ERROR_NOT_FOUND) naming it", err)
			}
			for _, name := range []string{"", drivertest.KernelScale + "\x00"} {
				if _, err := m.Kernel(name); !errors.Is(err, driver.ErrInvalidValue) {
					t.Errorf("Kernel(%q) = %v; want ErrInvalidValue", name, err)
				}
			}
			k1, k2 := kernelOf(t, m, drivertest.KernelScale), kernelOf(t, m, drivertest.KernelScale)
			if k1 != k2 || k1.Name() != drivertest.KernelScale {
				t.Errorf("Kernel twice gave %p and %p (%s); want the same kernel", k1, k2, k1.Name())
			}
		})
	}
}

func TestLaunchArgMismatch(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d := drv.devs[0]
	m := loadKernels(t, launcher(t, drv, 0), drivertest.KernelPTX)
	add := kernelOf(t, m, drivertest.KernelVectorAdd)
	p := upload(t, d, make([]float32, 4))
	ok := mustArgs(t, p, p, p, int32(4))
	tests := []struct {
		name   string
		cfg    driver.LaunchConfig
		args   *driver.Args
		want   string
		driver bool // refused by the driver, not before
	}{
		{"too few", grid1D(4), mustArgs(t, p, p, p), "3 arguments; the kernel has 4 parameters", false},
		{"too many", grid1D(4), mustArgs(t, p, p, p, int32(4), int32(0)), "5 arguments", false},
		{"nil args", grid1D(4), nil, "0 arguments", false},
		{"int64 for int", grid1D(4), mustArgs(t, p, p, p, int64(4)), "argument 3 is 8 bytes; parameter 3 is 4 bytes", false},
		{"float for pointer", grid1D(4), mustArgs(t, float32(1), p, p, int32(4)), "argument 0 is 4 bytes", false},
		{"block too big", driver.LaunchConfig{Block: driver.Dim3{X: 32, Y: 64}}, ok, "2048 threads; the device allows at most 1024", false},
		{"shared too big", driver.LaunchConfig{Block: driver.Dim3{X: 32}, SharedMem: 64 << 10}, ok, "at most 49152", false},
		{"block z beyond 64", driver.LaunchConfig{Block: driver.Dim3{X: 1, Y: 1, Z: 128}}, ok, "CUDA_ERROR_INVALID_VALUE", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := l.Counter("cuLaunchKernel")
			err := add.Launch(nil, tc.cfg, tc.args)
			if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), drivertest.KernelVectorAdd) {
				t.Errorf("Launch = %v; want ErrInvalidValue naming the kernel and %q", err, tc.want)
			}
			if calls := l.Counter("cuLaunchKernel") - before; (calls != 0) != tc.driver {
				t.Errorf("%d cuLaunchKernel calls; want the driver reached only where it refuses: %v", calls, tc.driver)
			}
		})
	}
	if err := add.Launch(nil, grid1D(4), ok); err != nil {
		t.Errorf("a right launch after the refusals: %v", err)
	}
	if _, _, err := d.MemInfo(); err != nil {
		t.Errorf("the device after the refusals: %v", err)
	}
}

// TestLaunchFaultLosesDevice: a kernel that traps, and one that reads out
// of bounds, fail when their work runs; the error surfaces at the next
// synchronisation as ErrDeviceLost, sticky on the device as CUDA leaves
// the context unusable.
func TestLaunchFaultLosesDevice(t *testing.T) {
	for _, tc := range []struct {
		name, kernel string
		args         func(p driver.Ptr) []any
		code         int
	}{
		{"trap", drivertest.KernelFault, func(p driver.Ptr) []any { return []any{p} }, errLaunchFailed},
		{"out of bounds", drivertest.KernelScale, func(p driver.Ptr) []any { return []any{p, float32(2), int32(1 << 20)} }, errIllegalAddress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := buildFake(t, nil)
			drv := openFake(t, l)
			d := drv.devs[0]
			m := loadKernels(t, launcher(t, drv, 0), drivertest.KernelPTX)
			k := kernelOf(t, m, tc.kernel)
			x := upload(t, d, []float32{1, 2, 3, 4})
			s, err := d.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Launch(s, grid1D(1<<20), mustArgs(t, tc.args(x)...)); err != nil {
				t.Fatalf("Launch = %v; the fault shows when the work runs, not at the enqueue", err)
			}
			err = s.Synchronize()
			var e *driver.Error
			if !errors.Is(err, driver.ErrDeviceLost) || !errors.As(err, &e) || e.Code != tc.code {
				t.Fatalf("Synchronize after the faulting launch = %v; want ErrDeviceLost with CUresult %d", err, tc.code)
			}
			if _, err := d.Malloc(8); !errors.Is(err, driver.ErrDeviceLost) {
				t.Errorf("Malloc after the fault = %v; want ErrDeviceLost (sticky)", err)
			}
			if err := k.Launch(nil, grid1D(1), mustArgs(t, tc.args(x)...)); !errors.Is(err, driver.ErrDeviceLost) {
				t.Errorf("Launch after the fault = %v; want ErrDeviceLost", err)
			}
			if _, err := m.Kernel(drivertest.KernelVectorAdd); !errors.Is(err, driver.ErrDeviceLost) {
				t.Errorf("Kernel after the fault = %v; want ErrDeviceLost", err)
			}
			if _, err := launcher(t, drv, 0).LoadModule([]byte(drivertest.KernelPTX)); !errors.Is(err, driver.ErrDeviceLost) {
				t.Errorf("LoadModule after the fault = %v; want ErrDeviceLost", err)
			}
			if err := drv.Close(); err != nil {
				t.Errorf("Close of the lost device with a live module = %v; want nil", err)
			}
			if n := l.LiveImages(true); n != 0 {
				t.Errorf("%d libraries still loaded after Close", n)
			}
		})
	}
}

func TestModuleUnload(t *testing.T) {
	for _, omit := range [][]string{nil, libraryLoader} {
		library := len(omit) == 0
		t.Run(fmt.Sprint("library=", library), func(t *testing.T) {
			l := buildFake(t, nil, omit...)
			drv := openFake(t, l)
			d := drv.devs[0]
			ld := launcher(t, drv, 0)
			m, err := ld.LoadModule([]byte(drivertest.KernelPTX))
			if err != nil {
				t.Fatal(err)
			}
			k := kernelOf(t, m, drivertest.KernelScale)
			x := upload(t, d, []float32{1})
			s, err := d.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			for range 3 {
				if err := k.Launch(s, grid1D(1), mustArgs(t, x, float32(2), int32(1))); err != nil {
					t.Fatal(err)
				}
			}
			if n := l.LiveImages(library); n != 1 {
				t.Fatalf("%d images loaded; want 1", n)
			}
			syncs := l.Counter("cuCtxSynchronize")
			if err := m.Unload(); err != nil {
				t.Fatalf("Unload: %v", err)
			}
			if l.Counter("cuCtxSynchronize") == syncs || l.Counter("unload_before_sync") != 0 {
				t.Errorf("Unload did not wait for the launches queued with the module (%d unloads before a synchronisation)", l.Counter("unload_before_sync"))
			}
			if n := l.LiveImages(library); n != 0 {
				t.Errorf("%d images loaded after Unload; want 0", n)
			}
			if got := download(t, d, x, 1)[0]; got != 8 {
				t.Errorf("x = %v after three launches of scale by 2; want 8", got)
			}
			before := l.Counter("cuLaunchKernel")
			if err := k.Launch(s, grid1D(1), mustArgs(t, x, float32(2), int32(1))); !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "unloaded") {
				t.Errorf("Launch after Unload = %v; want ErrInvalidValue saying the module was unloaded", err)
			}
			if l.Counter("cuLaunchKernel") != before {
				t.Error("a launch after Unload reached the driver")
			}
			if _, err := m.Kernel(drivertest.KernelScale); !errors.Is(err, driver.ErrInvalidValue) {
				t.Errorf("Kernel after Unload = %v; want ErrInvalidValue", err)
			}
			if err := m.Unload(); err != nil {
				t.Errorf("second Unload = %v; want nil", err)
			}

			// Close unloads the modules still loaded.
			if _, err := ld.LoadModule([]byte(drivertest.KernelPTX)); err != nil {
				t.Fatal(err)
			}
			if err := drv.Close(); err != nil {
				t.Fatal(err)
			}
			if n := l.LiveImages(library); n != 0 {
				t.Errorf("%d images loaded after Close; want 0", n)
			}
			if _, err := ld.LoadModule([]byte(drivertest.KernelPTX)); !errors.Is(err, driver.ErrClosed) {
				t.Errorf("LoadModule after Close = %v; want ErrClosed", err)
			}
		})
	}
}

// TestLaunchConcurrent launches from several goroutines on several
// streams and both devices, with kernel lookups and a module loaded and
// unloaded meanwhile; each goroutine checks its own results.
func TestLaunchConcurrent(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	const workers, rounds, n = 4, 50, 300
	mods := []driver.Module{loadKernels(t, launcher(t, drv, 0), drivertest.KernelPTX), loadKernels(t, launcher(t, drv, 1), drivertest.KernelPTX)}
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				d := drv.devs[w%2]
				m := mods[w%2]
				s, err := d.NewStream()
				if err != nil {
					return err
				}
				defer s.Destroy()
				k, err := m.Kernel(drivertest.KernelVectorAdd)
				if err != nil {
					return err
				}
				a := make([]float32, n)
				for i := range a {
					a[i] = float32(i + w)
				}
				p, err := d.Malloc(4 * n)
				if err != nil {
					return err
				}
				defer d.Free(p)
				if err := d.CopyHtoDSync(p, floatBytes(a)); err != nil {
					return err
				}
				args := new(driver.Args)
				for range rounds { // p = p + p, rounds times
					args.Reset()
					args.Ptr(p).Ptr(p).Ptr(p).Int32(n)
					if err := k.Launch(s, grid1D(n), args); err != nil {
						return err
					}
				}
				if err := s.Synchronize(); err != nil {
					return err
				}
				b := make([]byte, 4*n)
				if err := d.CopyDtoHSync(b, p); err != nil {
					return err
				}
				for i, v := range bytesFloat(b) {
					if want := a[i] * (1 << rounds); v != want {
						return fmt.Errorf("worker %d: element %d = %v; want %v", w, i, v, want)
					}
				}
				return nil
			}()
		}()
	}
	ld := launcher(t, drv, 0)
	wg.Add(1)
	go func() { // loads, looks up and unloads beside the launches
		defer wg.Done()
		errs <- func() error {
			for range 20 {
				m, err := ld.LoadModule([]byte(drivertest.KernelPTX))
				if err != nil {
					return err
				}
				if _, err := m.Kernel(drivertest.KernelReduceSum); err != nil {
					return err
				}
				if err := m.Unload(); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestLaunchUnloadRace: launches racing an Unload either enqueue before it
// or fail with ErrInvalidValue; none reaches the driver after the unload.
func TestLaunchUnloadRace(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d := drv.devs[0]
	m, err := launcher(t, drv, 0).LoadModule([]byte(drivertest.KernelPTX))
	if err != nil {
		t.Fatal(err)
	}
	k := kernelOf(t, m, drivertest.KernelScale)
	x := upload(t, d, []float32{1})
	args := mustArgs(t, x, float32(1), int32(1))
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				// A stale handle would reach the fake as CUDA_ERROR_INVALID_HANDLE.
				if err := k.Launch(nil, grid1D(1), args); err != nil && (!errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "the module was unloaded")) {
					t.Errorf("Launch racing Unload = %v; want nil or ErrInvalidValue saying the module was unloaded", err)
					return
				}
			}
		}()
	}
	if err := m.Unload(); err != nil {
		t.Error(err)
	}
	wg.Wait()
	if n := l.Counter("unload_before_sync"); n != 0 {
		t.Errorf("%d unloads while launches were queued", n)
	}
}

// TestLaunchDoesNotAllocate: a launch with a reused *Args makes no Go
// allocation.
func TestLaunchDoesNotAllocate(t *testing.T) {
	if asanBuild {
		t.Skip("go test -asan makes cgo arguments escape; the count holds in the ordinary build")
	}
	drv := openFake(t, buildFake(t, nil))
	d := drv.devs[0]
	m := loadKernels(t, launcher(t, drv, 0), drivertest.KernelPTX)
	k := kernelOf(t, m, drivertest.KernelScale)
	x := upload(t, d, []float32{1})
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	args := new(driver.Args)
	cfg := grid1D(1)
	allocs := testing.AllocsPerRun(200, func() {
		args.Reset()
		args.Ptr(x).Float32(1).Int32(1)
		if err := k.Launch(s, cfg, args); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Launch allocates %v times per call; want 0", allocs)
	}
}

// foreignKernel is a driver.Kernel of no backend: RawLaunchLoop refuses it.
type foreignKernel struct{ driver.Kernel }

// TestRawLaunchLoop: the exported baseline loop launches n times in order
// on the stream with the arguments given, checks them once as Launch
// does, refuses what is not this backend's before the driver sees it, and
// stops at the first launch the driver refuses.
func TestRawLaunchLoop(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d := drv.devs[0]
	m := loadKernels(t, launcher(t, drv, 0), drivertest.KernelPTX)
	scale := kernelOf(t, m, drivertest.KernelScale)
	x := upload(t, d, []float32{1, 2, 3, 4, 5})
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	args := mustArgs(t, x, float32(2), int32(4))
	before := l.Counter("cuLaunchKernel")
	if err := RawLaunchLoop(scale, s, grid1D(4), args, 3); err != nil {
		t.Fatalf("RawLaunchLoop = %v", err)
	}
	if err := RawLaunchLoop(scale, nil, grid1D(4), args, 0); err != nil {
		t.Fatalf("RawLaunchLoop of no launches on the default stream = %v", err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if n := l.Counter("cuLaunchKernel") - before; n != 3 {
		t.Errorf("%d cuLaunchKernel calls; want 3", n)
	}
	if got, want := download(t, d, x, 5), []float32{8, 16, 24, 32, 5}; !slices.Equal(got, want) {
		t.Errorf("x = %v after three launches of scale by 2 over 4 elements; want %v", got, want)
	}

	other, err := drv.devs[1].NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Destroy()
	tests := []struct {
		name   string
		k      driver.Kernel
		s      driver.Stream
		cfg    driver.LaunchConfig
		args   *driver.Args
		n      int
		want   string
		driver bool // refused by the driver, not before
	}{
		{"nil kernel", nil, nil, grid1D(4), args, 1, "not a kernel of the cuda backend", false},
		{"nil *kernel", (*kernel)(nil), nil, grid1D(4), args, 1, "not a kernel of the cuda backend", false},
		{"foreign kernel", foreignKernel{}, nil, grid1D(4), args, 1, "not a kernel of the cuda backend", false},
		{"stream of another device", scale, other, grid1D(4), args, 1, "", false},
		{"negative n", scale, s, grid1D(4), args, -1, "-1 launches; want n >= 0", false},
		{"argument sizes", scale, s, grid1D(4), mustArgs(t, x, float64(2), int32(4)), 1, "argument 1 is 8 bytes", false},
		{"block z beyond 64", scale, s, driver.LaunchConfig{Block: driver.Dim3{X: 1, Y: 1, Z: 128}}, args, 5, "CUDA_ERROR_INVALID_VALUE", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := l.Counter("cuLaunchKernel")
			err := RawLaunchLoop(tc.k, tc.s, tc.cfg, tc.args, tc.n)
			if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RawLaunchLoop = %v; want ErrInvalidValue saying %q", err, tc.want)
			}
			calls := l.Counter("cuLaunchKernel") - before
			if want := map[bool]int64{true: 1, false: 0}[tc.driver]; calls != want {
				t.Errorf("%d cuLaunchKernel calls; want %d (the driver reached only where it refuses, and the loop stops there)", calls, want)
			}
		})
	}

	if err := m.Unload(); err != nil {
		t.Fatal(err)
	}
	before = l.Counter("cuLaunchKernel")
	if err := RawLaunchLoop(scale, s, grid1D(4), args, 2); !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "unloaded") {
		t.Errorf("RawLaunchLoop after Unload = %v; want ErrInvalidValue saying the module was unloaded", err)
	}
	if l.Counter("cuLaunchKernel") != before {
		t.Error("a loop after Unload reached the driver")
	}
	if _, _, err := d.MemInfo(); err != nil {
		t.Errorf("the device after the refusals: %v", err)
	}
}
