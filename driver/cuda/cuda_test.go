//go:build linux && cgo

package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/cuda/cudatest"
)

// buildFake links a fresh fake libcuda (cudatest) with env set before it
// loads and without the entry points omit; under go test -asan the fake is
// built with AddressSanitizer too.
func buildFake(tb testing.TB, env map[string]string, omit ...string) *cudatest.Lib {
	tb.Helper()
	return cudatest.BuildWith(tb, cudatest.Options{Env: env, Omit: omit, ASan: true})
}

// openFake opens the backend on fake instance l and closes it at the end
// of the test.
func openFake(t testing.TB, l *cudatest.Lib) *cudaDriver {
	t.Helper()
	drv, err := Open("lib=" + l.Path)
	if err != nil {
		t.Fatalf("Open on the fake: %v", err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv.(*cudaDriver)
}

func dev(t testing.TB, drv driver.Driver, i int) driver.Device {
	t.Helper()
	d, err := drv.Device(i)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestOpenWithoutLibrary(t *testing.T) {
	notLib := filepath.Join(t.TempDir(), "libcuda.so.1")
	if err := os.WriteFile(notLib, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(t.TempDir(), "missing", "libcuda.so.1"), notLib} {
		drv, err := Open("lib=" + path)
		if err == nil {
			drv.Close()
			t.Fatalf("Open(lib=%s) succeeded", path)
		}
		if !errors.Is(err, driver.ErrNoDevice) {
			t.Errorf("Open(lib=%s) = %v; want an error wrapping ErrNoDevice", path, err)
		}
		if !strings.Contains(err.Error(), EnvLibrary) || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(lib=%s) error %q should name the file (dlerror) and %s", path, err, EnvLibrary)
		}
	}
}

func TestOpenThroughEnvironment(t *testing.T) {
	l := buildFake(t, nil)
	t.Setenv(EnvLibrary, l.Path)
	drv, err := driver.Open("cuda", "")
	if err != nil {
		t.Fatalf("driver.Open(cuda) with %s=%s: %v", EnvLibrary, l.Path, err)
	}
	defer drv.Close()
	if drv.Name() != "cuda" || drv.Version() != "cuda 13.0" || drv.DeviceCount() != 2 {
		t.Errorf("got name %q version %q devices %d; want cuda, cuda 13.0, 2", drv.Name(), drv.Version(), drv.DeviceCount())
	}
	t.Setenv(driver.EnvDriver, "cuda")
	auto, err := driver.Open("auto", "")
	if err != nil {
		t.Fatalf("auto with %s=cuda: %v", driver.EnvDriver, err)
	}
	defer auto.Close()
	if auto.Name() != "cuda" {
		t.Errorf("auto opened %q, want cuda", auto.Name())
	}
}

// TestAutoProbe checks cuda as a candidate of driver.Open("auto"): its
// probe counts the devices without retaining a context, only the chosen
// driver retains them, and a probe that finds nothing says why. sim is not
// linked into this test binary, so cuda is the only candidate.
func TestAutoProbe(t *testing.T) {
	l := buildFake(t, nil)
	t.Setenv(EnvLibrary, l.Path)
	t.Setenv(driver.EnvDriver, "")
	if err := probe(""); err != nil {
		t.Fatalf("probe on the fake: %v", err)
	}
	if n := l.Counter("cuDevicePrimaryCtxRetain"); n != 0 {
		t.Errorf("probe retained %d primary contexts; want 0", n)
	}
	drv, err := driver.Open("auto", "")
	if err != nil {
		t.Fatalf("Open(auto) with the fake as %s: %v", EnvLibrary, err)
	}
	if drv.Name() != "cuda" || drv.DeviceCount() != 2 {
		t.Errorf("Open(auto) = %s with %d devices; want cuda with 2", drv.Name(), drv.DeviceCount())
	}
	if n := l.Counter("cuDevicePrimaryCtxRetain"); n != 2 {
		t.Errorf("auto retained %d primary contexts; want 2, for the driver it opened", n)
	}
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}

	noDev := buildFake(t, map[string]string{"FAKECUDA_FAIL": "cuDeviceGetCount:100"})
	tests := []struct {
		name, lib, dsn string
		want           error
		says           string
	}{
		{"a dsn cuda does not take", l.Path, "capacity=1GiB", driver.ErrInvalidValue, "capacity"},
		{"no library", filepath.Join(t.TempDir(), "libcuda.so.1"), "", driver.ErrNoDevice, "cannot load the CUDA driver library"},
		{"no device", noDev.Path, "", driver.ErrNoDevice, "cuDeviceGetCount"},
	}
	// sim is registered too (drivertest imports it), as in a program that
	// imports both: auto passes over cuda, whose probe says why, to sim.
	for _, tt := range tests {
		t.Setenv(EnvLibrary, tt.lib)
		if err := probe(tt.dsn); !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: probe(%q) = %v; want %v, saying %q", tt.name, tt.dsn, err, tt.want, tt.says)
		}
		drv, err := driver.Open("auto", tt.dsn)
		if err != nil {
			t.Errorf("%s: Open(auto, %q) = %v; want sim, past cuda", tt.name, tt.dsn, err)
			continue
		}
		if drv.Name() != "sim" {
			t.Errorf("%s: Open(auto, %q) opened %s; want sim, past cuda", tt.name, tt.dsn, drv.Name())
		}
		drv.Close()
	}
}

func TestOpenDSN(t *testing.T) {
	_, err := Open("library=x")
	if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "lib") {
		t.Errorf("Open(library=x) = %v; want ErrInvalidValue listing the valid key lib", err)
	}
}

func TestOpenMissingRequiredSymbol(t *testing.T) {
	for _, sym := range []string{"cuMemAlloc_v2", "cuCtxGetCurrent", "cuEventRecord"} {
		l := buildFake(t, nil, sym)
		drv, err := Open("lib=" + l.Path)
		if err == nil {
			drv.Close()
			t.Fatalf("Open without %s succeeded", sym)
		}
		if !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), sym) {
			t.Errorf("Open without %s = %v; want ErrNotSupported naming it", sym, err)
		}
	}
}

func TestOpenPlainFallback(t *testing.T) {
	// Without cuStreamDestroy_v2 the loader has no plain cuStreamDestroy in
	// the fake either, so the load must fail naming the versioned symbol:
	// the fallback is tried, never invented.
	l := buildFake(t, nil, "cuStreamDestroy_v2")
	if _, err := Open("lib=" + l.Path); !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "cuStreamDestroy_v2") {
		t.Errorf("Open without cuStreamDestroy_v2 = %v; want ErrNotSupported naming it", err)
	}
}

func TestCuInitFailureIsRetried(t *testing.T) {
	l := buildFake(t, nil)
	if err := l.Fail("cuInit", errNoDevice, 0, 1); err != nil {
		t.Fatal(err)
	}
	_, err := Open("lib=" + l.Path)
	var de *driver.Error
	if !errors.Is(err, driver.ErrNoDevice) || !errors.As(err, &de) || de.Op != "cuInit" || de.Name != "CUDA_ERROR_NO_DEVICE" {
		t.Fatalf("Open with cuInit failing = %v; want *driver.Error{Op: cuInit, Name: CUDA_ERROR_NO_DEVICE} wrapping ErrNoDevice", err)
	}
	openFake(t, l) // the failure was not cached
	openFake(t, l) // and a loaded library is: cuInit ran once more, not twice
	if n := l.Counter("cuInit"); n != 2 {
		t.Errorf("cuInit called %d times; want 2 (one failure, one success)", n)
	}
}

// TestOpenReleasesOnDeviceFailure: when a later device fails to open, Open
// releases the contexts it retained and reports a failed release along
// with the error that stopped it.
func TestOpenReleasesOnDeviceFailure(t *testing.T) {
	l := buildFake(t, nil)
	if err := l.Fail("cuDeviceGetName", errInvalidDevice, 1, 1); err != nil { // device 1
		t.Fatal(err)
	}
	if err := l.Fail("cuDevicePrimaryCtxRelease_v2", errNotPermitted, 0, 1); err != nil {
		t.Fatal(err)
	}
	_, err := Open("lib=" + l.Path)
	if !errors.Is(err, driver.ErrNoDevice) || !strings.Contains(err.Error(), "device 1: cuDeviceGetName") {
		t.Errorf("Open with device 1 failing = %v; want the cuDeviceGetName error (ErrNoDevice)", err)
	}
	if !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "device 0: cuDevicePrimaryCtxRelease_v2") {
		t.Errorf("Open with the release failing = %v; want the cuDevicePrimaryCtxRelease_v2 error too", err)
	}
	if n := l.Counter("cuDevicePrimaryCtxRelease_v2"); n != 1 {
		t.Errorf("Open released %d primary contexts; want 1 (device 0's)", n)
	}
	// Without the release failure the error is the device's alone.
	if err := l.Fail("cuDeviceGetName", errInvalidDevice, 1, 1); err != nil {
		t.Fatal(err)
	}
	_, err = Open("lib=" + l.Path)
	if !errors.Is(err, driver.ErrNoDevice) || errors.Is(err, driver.ErrNotSupported) {
		t.Errorf("Open with device 1 failing = %v; want only the cuDeviceGetName error", err)
	}
}

func TestCapabilities(t *testing.T) {
	tests := []struct {
		name        string
		omit        []string
		vmmAttr     bool
		wantVMM     bool
		wantPeer    bool
		wantNames   bool
		wantHostReg bool
		hostRegOff  bool // the device reports no host registration support
	}{
		{"all", nil, true, true, true, true, true, false},
		{"attribute off", nil, false, false, true, true, true, false},
		{"no cuMemCreate", []string{"cuMemCreate"}, true, false, true, true, true, false},
		{"no cuMemSetAccess", []string{"cuMemSetAccess"}, true, false, true, true, true, false},
		{"no granularity", []string{"cuMemGetAllocationGranularity"}, true, false, true, true, true, false},
		{"no peer copy", []string{"cuMemcpyPeerAsync"}, true, true, false, true, true, false},
		{"no VMM and no peer", []string{"cuMemMap", "cuDeviceCanAccessPeer"}, true, false, false, true, true, false},
		{"no cuGetErrorName", []string{"cuGetErrorName"}, true, true, true, false, true, false},
		{"no cuMemHostRegister_v2", []string{"cuMemHostRegister_v2"}, true, true, true, true, false, false},
		{"no cuMemHostUnregister", []string{"cuMemHostUnregister"}, true, true, true, true, false, false},
		{"host register attribute off", nil, true, true, true, true, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"FAKECUDA_VMM": "0"}
			if tc.vmmAttr {
				env["FAKECUDA_VMM"] = "1"
			}
			if tc.hostRegOff {
				env["FAKECUDA_HOST_REGISTER"] = "0"
			}
			l := buildFake(t, env, tc.omit...)
			drv := openFake(t, l)
			for i := range drv.DeviceCount() {
				d := dev(t, drv, i)
				if _, ok := driver.AsVMM(d); ok != tc.wantVMM {
					t.Errorf("device %d offers VMM = %v; want %v", i, ok, tc.wantVMM)
				}
				if _, ok := driver.AsPeer(d); ok != tc.wantPeer {
					t.Errorf("device %d offers Peer = %v; want %v", i, ok, tc.wantPeer)
				}
				if _, ok := d.(driver.HostRegisterDevice); ok != tc.wantHostReg {
					t.Errorf("device %d offers HostRegisterDevice = %v; want %v", i, ok, tc.wantHostReg)
				}
				props, err := d.(driver.PropertiesDevice).Properties()
				if err != nil {
					t.Fatal(err)
				}
				if tc.wantVMM != (props.Attributes["vmm"] == "true") {
					t.Errorf("Properties vmm = %q; want %v", props.Attributes["vmm"], tc.wantVMM)
				}
				if tc.wantHostReg != (props.Attributes["hostregister"] == "true") {
					t.Errorf("Properties hostregister = %q; want %v", props.Attributes["hostregister"], tc.wantHostReg)
				}
				if !tc.wantHostReg && props.Attributes["hostregister_off_because"] == "" {
					t.Errorf("Properties should say why host registration is off: %v", props.Attributes)
				}
				if !tc.wantVMM && props.Attributes["vmm_off_because"] == "" {
					t.Errorf("Properties should say why VMM is off: %v", props.Attributes)
				}
				for _, sym := range tc.omit {
					if !strings.Contains(props.Attributes["missing_entry_points"], sym) {
						t.Errorf("missing_entry_points %q does not name %s", props.Attributes["missing_entry_points"], sym)
					}
				}
			}
		})
	}
}

func TestProperties(t *testing.T) {
	drv := openFake(t, buildFake(t, nil))
	d := dev(t, drv, 1)
	p, err := d.(driver.PropertiesDevice).Properties()
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "Fake CUDA Device 1" || p.TotalMemory != 1<<30 || p.ComputeCapability != "9.0" ||
		p.MultiProcessors != 132 || p.Simulated || p.Attributes["driver_version"] != "13.0" ||
		p.Attributes["vmm_granularity"] != "2097152" {
		t.Errorf("Properties = %+v", p)
	}
	if d.Name() != p.Name || d.Ordinal() != 1 {
		t.Errorf("Name, Ordinal = %q, %d", d.Name(), d.Ordinal())
	}
}

// TestErrorMapping injects CUresult codes into cuMemAlloc_v2 and checks the
// *driver.Error and its sentinel.
func TestErrorMapping(t *testing.T) {
	tests := []struct {
		code     int
		name     string
		sentinel error // nil: none of the sentinels
		lost     bool
	}{
		{1, "CUDA_ERROR_INVALID_VALUE", driver.ErrInvalidValue, false},
		{2, "CUDA_ERROR_OUT_OF_MEMORY", driver.ErrOutOfMemory, false},
		{3, "CUDA_ERROR_NOT_INITIALIZED", driver.ErrNoDevice, false},
		{4, "CUDA_ERROR_DEINITIALIZED", driver.ErrNoDevice, false},
		{100, "CUDA_ERROR_NO_DEVICE", driver.ErrNoDevice, false},
		{101, "CUDA_ERROR_INVALID_DEVICE", driver.ErrNoDevice, false},
		{201, "CUDA_ERROR_INVALID_CONTEXT", driver.ErrInvalidValue, false},
		{400, "CUDA_ERROR_INVALID_HANDLE", driver.ErrInvalidValue, false},
		{801, "CUDA_ERROR_NOT_SUPPORTED", driver.ErrNotSupported, false},
		{214, "CUDA_ERROR_ECC_UNCORRECTABLE", driver.ErrDeviceLost, true},
		{700, "CUDA_ERROR_ILLEGAL_ADDRESS", driver.ErrDeviceLost, true},
		{702, "CUDA_ERROR_LAUNCH_TIMEOUT", driver.ErrDeviceLost, true},
		{714, "CUDA_ERROR_HARDWARE_STACK_ERROR", driver.ErrDeviceLost, true},
		{715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", driver.ErrDeviceLost, true},
		{716, "CUDA_ERROR_MISALIGNED_ADDRESS", driver.ErrDeviceLost, true},
		{717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", driver.ErrDeviceLost, true},
		{718, "CUDA_ERROR_INVALID_PC", driver.ErrDeviceLost, true},
		{719, "CUDA_ERROR_LAUNCH_FAILED", driver.ErrDeviceLost, true},
		{999, "CUDA_ERROR_UNKNOWN", nil, false},
		{4242, "CUDA_ERROR_FAKE_4242", nil, false}, // named by the fake's cuGetErrorName
		{12345, "CUDA_ERROR_12345", nil, false},    // named by nobody
	}
	sentinels := []error{driver.ErrOutOfMemory, driver.ErrInvalidValue, driver.ErrInvalidPointer, driver.ErrNotPinned,
		driver.ErrNotSupported, driver.ErrNoDevice, driver.ErrClosed, driver.ErrDeviceLost}
	l := buildFake(t, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			drv := openFake(t, l) // a fresh driver: lost devices stay lost
			d := dev(t, drv, 0)
			if err := l.Fail("cuMemAlloc_v2", tc.code, 0, 1); err != nil {
				t.Fatal(err)
			}
			_, err := d.Malloc(512)
			var de *driver.Error
			if !errors.As(err, &de) {
				t.Fatalf("Malloc with %d injected = %v; want a *driver.Error", tc.code, err)
			}
			if de.Op != "cuMemAlloc_v2" || de.Code != tc.code || de.Name != tc.name {
				t.Errorf("got Op %q Code %d Name %q; want cuMemAlloc_v2 %d %s", de.Op, de.Code, de.Name, tc.code, tc.name)
			}
			for _, s := range sentinels {
				if want := errors.Is(tc.sentinel, s); errors.Is(err, s) != want {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, !want)
				}
			}
			_, err = d.Malloc(512) // the injection was for one call
			if tc.lost != errors.Is(err, driver.ErrDeviceLost) || (!tc.lost && err != nil) {
				t.Errorf("next Malloc = %v; want lost=%v", err, tc.lost)
			}
		})
	}
}

func TestErrorNameWithoutGetErrorName(t *testing.T) {
	l := buildFake(t, nil, "cuGetErrorName")
	d := dev(t, openFake(t, l), 0)
	if err := l.Fail("cuMemAlloc_v2", 4242, 0, 1); err != nil {
		t.Fatal(err)
	}
	_, err := d.Malloc(1)
	var de *driver.Error
	if !errors.As(err, &de) || de.Name != "CUDA_ERROR_4242" {
		t.Errorf("Malloc = %v; want Name CUDA_ERROR_4242", err)
	}
	// Names the table knows need no cuGetErrorName.
	l.Fail("cuMemAlloc_v2", 2, 0, 1)
	if _, err := d.Malloc(1); !errors.As(err, &de) || de.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Errorf("Malloc = %v; want CUDA_ERROR_OUT_OF_MEMORY", err)
	}
}

func TestContextStepErrorsNameTheCall(t *testing.T) {
	for _, op := range []string{"cuCtxGetCurrent", "cuCtxSetCurrent"} {
		t.Run(op, func(t *testing.T) {
			l := buildFake(t, nil)
			drv := openFake(t, l)
			d0, d1 := dev(t, drv, 0), dev(t, drv, 1)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if _, err := d0.Malloc(1); err != nil { // makes device 0 current
				t.Fatal(err)
			}
			l.Fail(op, errInvalidContext, 0, 1)
			_, err := d1.Malloc(1) // must switch, so both steps run
			var de *driver.Error
			if !errors.As(err, &de) || de.Op != op || !errors.Is(err, driver.ErrInvalidValue) {
				t.Errorf("Malloc = %v; want a *driver.Error from %s", err, op)
			}
		})
	}
}

func TestDeviceLostIsSticky(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d0, d1 := dev(t, drv, 0), dev(t, drv, 1)
	s, err := d0.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	e, err := d0.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	p, err := d0.Malloc(64)
	if err != nil {
		t.Fatal(err)
	}
	l.Fail("cuStreamSynchronize", errIllegalAddress, 0, 1)
	err = s.Synchronize()
	var de *driver.Error
	if !errors.Is(err, driver.ErrDeviceLost) || !errors.As(err, &de) || de.Name != "CUDA_ERROR_ILLEGAL_ADDRESS" {
		t.Fatalf("Synchronize = %v; want CUDA_ERROR_ILLEGAL_ADDRESS as ErrDeviceLost", err)
	}
	before := l.Counter("cuCtxGetCurrent")
	buf := make([]byte, 8)
	calls := map[string]func() error{
		"Malloc":        func() error { _, err := d0.Malloc(8); return err },
		"Free":          func() error { return d0.Free(p) },
		"MemInfo":       func() error { _, _, err := d0.MemInfo(); return err },
		"HostAlloc":     func() error { _, err := d0.HostAlloc(8); return err },
		"NewStream":     func() error { _, err := d0.NewStream(); return err },
		"NewEvent":      func() error { _, err := d0.NewEvent(); return err },
		"CopyHtoDSync":  func() error { return d0.CopyHtoDSync(p, buf) },
		"CopyDtoHSync":  func() error { return d0.CopyDtoHSync(buf, p) },
		"Memset":        func() error { return d0.Memset(p, 1, 8, s) },
		"Synchronize":   d0.Synchronize,
		"Stream.Query":  func() error { _, err := s.Query(); return err },
		"Default.Query": func() error { _, err := d0.DefaultStream().Query(); return err },
		"Record":        func() error { return e.Record(s) },
		"Event.Query":   func() error { _, err := e.Query(); return err },
		"Event.Sync":    e.Synchronize,
		"WaitEvent":     func() error { return s.WaitEvent(e) },
		"Properties":    func() error { _, err := d0.(driver.PropertiesDevice).Properties(); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, driver.ErrDeviceLost) {
			t.Errorf("%s after the device was lost = %v; want ErrDeviceLost", name, err)
		}
	}
	if n := l.Counter("cuCtxGetCurrent") - before; n != 0 {
		t.Errorf("a lost device made %d driver calls; want none", n)
	}
	if _, err := d1.Malloc(8); err != nil {
		t.Errorf("device 1 should be unaffected: %v", err)
	}
}

func TestFreeTracking(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d0, d1 := dev(t, drv, 0), dev(t, drv, 1)
	if p, err := d0.Malloc(0); p != 0 || err != nil {
		t.Errorf("Malloc(0) = %v, %v; want 0, nil", p, err)
	}
	if err := d0.Free(0); err != nil {
		t.Errorf("Free(0) = %v", err)
	}
	if n := l.Counter("cuMemAlloc_v2") + l.Counter("cuMemFree_v2"); n != 0 {
		t.Errorf("Malloc(0) and Free(0) made %d driver calls", n)
	}
	p, err := d0.Malloc(100)
	if err != nil {
		t.Fatal(err)
	}
	if l.PtrDevice(uint64(p)) != 0 {
		t.Errorf("allocation landed on device %d; want 0", l.PtrDevice(uint64(p)))
	}
	for _, bad := range []struct {
		name string
		d    driver.Device
		p    driver.Ptr
	}{{"interior", d0, p + 1}, {"other device", d1, p}, {"never allocated", d0, 0x1000}} {
		if err := bad.d.Free(bad.p); !errors.Is(err, driver.ErrInvalidPointer) {
			t.Errorf("Free %s = %v; want ErrInvalidPointer", bad.name, err)
		}
	}
	if err := d0.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := d0.Free(p); !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("double Free = %v; want ErrInvalidPointer", err)
	}
	if n := l.Counter("cuMemFree_v2"); n != 1 {
		t.Errorf("cuMemFree_v2 called %d times; want 1 (bad frees never reach the driver)", n)
	}
	// A failed free keeps the allocation, so it can be freed again.
	p, _ = d0.Malloc(8)
	l.Fail("cuMemFree_v2", errInvalidValue, 0, 1)
	if err := d0.Free(p); !errors.Is(err, driver.ErrInvalidValue) {
		t.Fatalf("Free with an injected failure = %v", err)
	}
	if err := d0.Free(p); err != nil {
		t.Errorf("Free after a failed Free = %v", err)
	}
	if n := l.Live(cudatest.LiveDevice); n != 0 {
		t.Errorf("%d allocations leaked", n)
	}
}

func TestPinnedHostMemory(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d0, d1 := dev(t, drv, 0), dev(t, drv, 1)
	empty, err := d0.HostAlloc(0)
	if err != nil || empty.Len() != 0 {
		t.Fatalf("HostAlloc(0) = %v, %v", empty, err)
	}
	if err := d0.HostFree(empty); err != nil {
		t.Errorf("HostFree(empty) = %v", err)
	}
	if n := l.Counter("cuMemHostAlloc") + l.Counter("cuMemFreeHost"); n != 0 {
		t.Errorf("the empty buffer made %d driver calls", n)
	}
	if _, err := d0.HostAlloc(-1); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("HostAlloc(-1) = %v", err)
	}
	hb, err := d0.HostAlloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	if l.LastFlags("cuMemHostAlloc") != 0 {
		t.Errorf("cuMemHostAlloc flags %#x; want 0", l.LastFlags("cuMemHostAlloc"))
	}
	other, err := d1.HostAlloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	p, err := d0.Malloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	s := d0.DefaultStream()
	b := hb.Bytes()
	for i := range b {
		b[i] = byte(i)
	}
	if err := d0.CopyHtoD(p, b[100:200], s); err != nil {
		t.Errorf("CopyHtoD from a sub-slice of a HostBuffer: %v", err)
	}
	if err := d0.CopyDtoH(b[1000:1100], p, s); err != nil {
		t.Errorf("CopyDtoH into a sub-slice of a HostBuffer: %v", err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if b[1000] != 100 || b[1099] != byte(199) {
		t.Errorf("round trip through the device gave %d..%d; want 100..199", b[1000], b[1099])
	}
	goMem := make([]byte, 64)
	for name, err := range map[string]error{
		"Go memory":      d0.CopyHtoD(p, goMem, s),
		"Go memory DtoH": d0.CopyDtoH(goMem, p, s),
		"other device":   d0.CopyHtoD(p, other.Bytes(), s),
	} {
		if !errors.Is(err, driver.ErrNotPinned) {
			t.Errorf("CopyHtoD from %s = %v; want ErrNotPinned", name, err)
		}
	}
	// Two buffers side by side do not make one: a slice must lie in one.
	if err := d0.CopyHtoD(p, unsafe.Slice(&b[4000], 200), s); !errors.Is(err, driver.ErrNotPinned) {
		t.Errorf("CopyHtoD from a slice running past the buffer's end = %v; want ErrNotPinned", err)
	}
	if err := d0.CopyHtoD(p, b[4096:], s); err != nil {
		t.Errorf("an empty copy = %v; want nil", err)
	}
	if err := d0.HostFree(hb); err != nil {
		t.Fatal(err)
	}
	if err := d0.CopyHtoD(p, b[:8], s); !errors.Is(err, driver.ErrNotPinned) {
		t.Errorf("CopyHtoD from a freed HostBuffer = %v; want ErrNotPinned", err)
	}
	if err := d0.HostFree(hb); !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("double HostFree = %v; want ErrInvalidPointer", err)
	}
	if err := d0.HostFree(other); !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("HostFree of device 1's buffer on device 0 = %v; want ErrInvalidPointer", err)
	}
	if err := d0.HostFree(nil); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("HostFree(nil) = %v", err)
	}
	d1.HostFree(other)
	d0.Free(p)
	if n := l.Live(cudatest.LiveHost); n != 0 {
		t.Errorf("%d host allocations leaked", n)
	}
}

func TestSyncCopiesTakeGoMemory(t *testing.T) {
	l := buildFake(t, nil)
	d := dev(t, openFake(t, l), 1)
	p, err := d.Malloc(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 1<<16)
	for i := range src {
		src[i] = byte(i * 7)
	}
	syncs := l.Counter("cuStreamSynchronize")
	if err := d.CopyHtoDSync(p, src); err != nil {
		t.Fatal(err)
	}
	if l.Counter("cuStreamSynchronize") != syncs+1 {
		t.Errorf("CopyHtoDSync did not synchronize the default stream after the copy")
	}
	dst := make([]byte, 1<<16)
	if err := d.CopyDtoHSync(dst, p); err != nil {
		t.Fatal(err)
	}
	if string(dst) != string(src) {
		t.Error("sync round trip changed the data")
	}
	l.Fail("cuStreamSynchronize", errLaunchFailed, 0, 1)
	var de *driver.Error
	if err := d.CopyHtoDSync(p, src); !errors.As(err, &de) || de.Op != "cuStreamSynchronize" || !errors.Is(err, driver.ErrDeviceLost) {
		t.Errorf("CopyHtoDSync with a failing synchronize = %v; want cuStreamSynchronize, ErrDeviceLost", err)
	}
}

func TestStreamAndEventFlags(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	for i := range 2 {
		d := dev(t, drv, i)
		s, err := d.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		if f := l.LastFlags("cuStreamCreate"); f != 1 {
			t.Errorf("cuStreamCreate flags %#x; want CU_STREAM_NON_BLOCKING (0x1)", f)
		}
		e, err := d.NewEvent()
		if err != nil {
			t.Fatal(err)
		}
		if f := l.LastFlags("cuEventCreate"); f != 2 {
			t.Errorf("cuEventCreate flags %#x; want CU_EVENT_DISABLE_TIMING (0x2)", f)
		}
		if s.ID() == 0 || d.DefaultStream().ID() != 0 {
			t.Errorf("stream IDs: new %d, default %d; want non-zero and 0", s.ID(), d.DefaultStream().ID())
		}
		s2, _ := d.NewStream()
		if s2.ID() == s.ID() {
			t.Errorf("two streams share ID %d", s.ID())
		}
		if err := d.DefaultStream().Destroy(); !errors.Is(err, driver.ErrInvalidValue) {
			t.Errorf("destroying the default stream = %v", err)
		}
		for _, x := range []interface{ Destroy() error }{s, s2, e} {
			if err := x.Destroy(); err != nil {
				t.Error(err)
			}
			if err := x.Destroy(); !errors.Is(err, driver.ErrInvalidValue) {
				t.Errorf("second Destroy = %v; want ErrInvalidValue", err)
			}
		}
		if _, err := s.Query(); !errors.Is(err, driver.ErrInvalidValue) {
			t.Errorf("Query of a destroyed stream = %v", err)
		}
		if err := d.CopyDtoD(1, 1, 1, s); !errors.Is(err, driver.ErrInvalidValue) {
			t.Errorf("copy on a destroyed stream = %v", err)
		}
	}
	if n := l.Counter("streams_without_non_blocking") + l.Counter("events_with_timing"); n != 0 {
		t.Errorf("%d streams or events created with the wrong flags", n)
	}
}

func TestStreamOfAnotherDevice(t *testing.T) {
	drv := openFake(t, buildFake(t, nil))
	d0, d1 := dev(t, drv, 0), dev(t, drv, 1)
	s1, _ := d1.NewStream()
	e0, _ := d0.NewEvent()
	if err := d0.Memset(0, 0, 1, s1); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Memset on another device's stream = %v", err)
	}
	if err := e0.Record(s1); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Record on another device's stream = %v", err)
	}
	// Waiting on another device's event is allowed, as in CUDA.
	if err := e0.Record(d0.DefaultStream()); err != nil {
		t.Fatal(err)
	}
	if err := s1.WaitEvent(e0); err != nil {
		t.Errorf("WaitEvent across devices = %v", err)
	}
	if s1.Device() != d1 || e0.Device() != d0 {
		t.Error("Stream.Device or Event.Device is not the device that made it")
	}
}

// TestContextAcrossThreads runs goroutines on many OS threads (some locked,
// some free to move) that use both devices at random; every operation must
// find its own device's context current, which the fake checks.
func TestContextAcrossThreads(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	devs := []driver.Device{dev(t, drv, 0), dev(t, drv, 1)}
	const goroutines, rounds = 64, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g%2 == 0 {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			for r := range rounds {
				i := (g + r*(g%3+1)) % 2
				d := devs[i]
				p, err := d.Malloc(64)
				if err != nil {
					errs <- err
					return
				}
				if got := l.PtrDevice(uint64(p)); got != i {
					errs <- fmt.Errorf("goroutine %d: Malloc on device %d landed on device %d", g, i, got)
					return
				}
				s, err := d.NewStream()
				if err != nil {
					errs <- err
					return
				}
				e, err := d.NewEvent()
				if err != nil {
					errs <- err
					return
				}
				if err := d.Memset(p, byte(g), 64, s); err != nil {
					errs <- err
					return
				}
				if err := e.Record(s); err != nil {
					errs <- err
					return
				}
				if _, err := e.Query(); err != nil {
					errs <- err
					return
				}
				if g%2 == 0 && l.CurrentDevice() != i {
					errs <- fmt.Errorf("goroutine %d: thread's current context is device %d after using device %d", g, l.CurrentDevice(), i)
					return
				}
				for _, err := range []error{e.Destroy(), s.Destroy(), d.Free(p)} {
					if err != nil {
						errs <- err
						return
					}
				}
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := l.Counter("ctx_mismatch"); n != 0 {
		t.Errorf("%d stream or event operations ran with another device's context current", n)
	}
}

// TestSetCurrentOnlyOnChange counts cuCtxSetCurrent on one locked thread:
// repeated calls for one device must not set the context again.
func TestSetCurrentOnlyOnChange(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d0, d1 := drv.devs[0], drv.devs[1]
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e, err := d0.NewEvent() // makes device 0 current on this thread
	if err != nil {
		t.Fatal(err)
	}
	sets, gets := l.Counter("cuCtxSetCurrent"), l.Counter("cuCtxGetCurrent")
	const n = 100
	for range n {
		if _, err := e.Query(); err != nil {
			t.Fatal(err)
		}
		if _, err := d0.DefaultStream().Query(); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.Counter("cuCtxSetCurrent") - sets; got != 0 {
		t.Errorf("%d cuCtxSetCurrent calls for %d calls on the current device; want 0", got, 2*n)
	}
	if got := l.Counter("cuCtxGetCurrent") - gets; got != 2*n {
		t.Errorf("%d cuCtxGetCurrent calls for %d operations; want one each", got, 2*n)
	}
	sets = l.Counter("cuCtxSetCurrent")
	for range n {
		d1.ctxCheck()
		d0.ctxCheck()
	}
	if got := l.Counter("cuCtxSetCurrent") - sets; got != 2*n {
		t.Errorf("%d cuCtxSetCurrent calls for %d device switches; want one each", got, 2*n)
	}
}

func TestVMMOnFake(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d := dev(t, drv, 1)
	v, ok := driver.AsVMM(d)
	if !ok {
		t.Fatal("the fake's device does not offer VMM")
	}
	g := v.Granularity()
	if g != 2<<20 {
		t.Fatalf("Granularity = %d; want 2 MiB", g)
	}
	for name, err := range map[string]error{
		"reserve 0":         func() error { _, err := v.AddressReserve(0, 0); return err }(),
		"reserve unaligned": func() error { _, err := v.AddressReserve(g+1, 0); return err }(),
		"alignment 3":       func() error { _, err := v.AddressReserve(g, 3); return err }(),
		"create half page":  func() error { _, err := v.MemCreate(g / 2); return err }(),
	} {
		if !errors.Is(err, driver.ErrInvalidValue) {
			t.Errorf("%s = %v; want ErrInvalidValue", name, err)
		}
	}
	p, err := v.AddressReserve(4*g, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := v.MemCreate(2 * g)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.MemMap(p+driver.Ptr(g), 2*g, 0, h); err != nil {
		t.Fatal(err)
	}
	// Not accessible before SetAccess: the fake refuses the copy.
	if err := d.CopyHtoDSync(p+driver.Ptr(g), []byte{1}); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("copy into a mapped range before SetAccess = %v; want ErrInvalidValue", err)
	}
	if err := v.SetAccess(p+driver.Ptr(g), 2*g); err != nil {
		t.Fatal(err)
	}
	msg := []byte("expandable segment")
	at := p + driver.Ptr(2*g) - 4 // across the two granules of one mapping
	if err := d.CopyHtoDSync(at, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if err := d.CopyDtoHSync(got, at); err != nil || string(got) != string(msg) {
		t.Errorf("read back %q, %v", got, err)
	}
	if err := v.MemRelease(h); err != nil { // mapped memory stays until unmapped
		t.Fatal(err)
	}
	if err := d.CopyDtoHSync(got, at); err != nil || string(got) != string(msg) {
		t.Errorf("after MemRelease, read back %q, %v", got, err)
	}
	if err := v.AddressFree(p, 4*g); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("AddressFree with a live mapping = %v; want ErrInvalidValue", err)
	}
	if err := v.MemUnmap(p+driver.Ptr(g), 2*g); err != nil {
		t.Fatal(err)
	}
	if err := v.AddressFree(p, 4*g); err != nil {
		t.Fatal(err)
	}
	if n := l.Live(cudatest.LiveReserve) + l.Live(cudatest.LiveMap); n != 0 {
		t.Errorf("%d reservations or mappings leaked", n)
	}
	if free, _, err := d.MemInfo(); err != nil || free != 1<<30 {
		t.Errorf("MemInfo free = %d, %v; want all of it back", free, err)
	}
}

func TestPeerOnFake(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d0, d1 := dev(t, drv, 0), dev(t, drv, 1)
	p0, ok := driver.AsPeer(d0)
	if !ok {
		t.Fatal("no Peer capability")
	}
	if can, err := p0.CanAccessPeer(d1); err != nil || !can {
		t.Errorf("CanAccessPeer(1) = %v, %v", can, err)
	}
	if can, err := p0.CanAccessPeer(d0); err != nil || can {
		t.Errorf("CanAccessPeer(self) = %v, %v; want false", can, err)
	}
	for range 2 { // enabling twice is fine
		if err := p0.EnablePeerAccess(d1); err != nil {
			t.Errorf("EnablePeerAccess = %v", err)
		}
	}
	if err := p0.EnablePeerAccess(d0); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("EnablePeerAccess(self) = %v", err)
	}
	src, _ := d1.Malloc(16)
	dst, _ := d0.Malloc(16)
	if err := d1.CopyHtoDSync(src, []byte("0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	s, _ := d0.NewStream()
	if err := p0.CopyPeer(dst, src, d1, 16, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := d0.CopyDtoHSync(got, dst); err != nil || string(got) != "0123456789abcdef" {
		t.Errorf("CopyPeer gave %q, %v", got, err)
	}
	other := openFake(t, l)
	if err := p0.CopyPeer(dst, src, dev(t, other, 1), 16, s); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("CopyPeer from another driver's device = %v", err)
	}
	if n := l.Counter("ctx_mismatch"); n != 0 {
		t.Errorf("%d operations with the wrong context", n)
	}
}

func TestClose(t *testing.T) {
	l := buildFake(t, nil)
	drv, err := Open("lib=" + l.Path)
	if err != nil {
		t.Fatal(err)
	}
	d := dev(t, drv, 0)
	s, _ := d.NewStream()
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := drv.Close(); err != nil {
		t.Errorf("second Close = %v; want nil (Close is idempotent)", err)
	}
	if _, err := drv.Device(0); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Device after Close = %v", err)
	}
	if _, err := d.Malloc(1); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Malloc after Close = %v", err)
	}
	if _, err := s.Query(); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Stream.Query after Close = %v", err)
	}
	if n := l.Counter("cuDevicePrimaryCtxRelease_v2"); n != 2 {
		t.Errorf("Close released %d primary contexts; want 2", n)
	}
	if _, err := drv.Device(2); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Device(2) after Close = %v", err)
	}
	drv2 := openFake(t, l)
	if _, err := drv2.Device(2); !errors.Is(err, driver.ErrNoDevice) {
		t.Errorf("Device(2) of 2 = %v; want ErrNoDevice", err)
	}
}
