package nvrtc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/nvrtc"
	"github.com/accelkit/accelkit/driver/nvrtc/nvrtctest"
)

// kernels is source in the style of drivertest's reference kernels.
const kernels = `
extern "C" __global__ void accelkit_vector_add(const float* a, const float* b, float* c, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void accelkit_scale(float* x, float s, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= s;
}
`

// open builds a fresh fake and opens it.
func open(t *testing.T, omit ...string) (*nvrtc.Compiler, *nvrtctest.Lib) {
	t.Helper()
	lib := nvrtctest.Build(t, omit...)
	c, err := nvrtc.Open(lib.Path)
	if err != nil {
		t.Fatal(err)
	}
	return c, lib
}

// noLeaks checks that every program the fake created was destroyed.
func noLeaks(t *testing.T, lib *nvrtctest.Lib) {
	t.Helper()
	if live, created, destroyed := lib.Count("live_programs"), lib.Count("nvrtcCreateProgram"), lib.Count("nvrtcDestroyProgram"); live != 0 || created != destroyed {
		t.Errorf("programs: %d live, %d created, %d destroyed; want all destroyed", live, created, destroyed)
	}
}

func TestCompilePTX(t *testing.T) {
	c, lib := open(t)
	r, err := c.Compile(context.Background(), []byte(kernels), nvrtc.Options{Arch: "compute_90"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != driver.ImagePTX || driver.DetectImage(r.Code) != driver.ImagePTX {
		t.Errorf("Kind = %v, DetectImage = %v; want PTX", r.Kind, driver.DetectImage(r.Code))
	}
	if bytes.IndexByte(r.Code, 0) >= 0 {
		t.Error("PTX keeps NVRTC's trailing NUL")
	}
	ptx := string(r.Code)
	for _, want := range []string{
		".target sm_90\n",
		".visible .entry accelkit_vector_add(\n\t.param .u64 accelkit_vector_add_param_0,\n\t.param .u64 accelkit_vector_add_param_1,\n\t.param .u64 accelkit_vector_add_param_2,\n\t.param .u32 accelkit_vector_add_param_3\n)",
		".visible .entry accelkit_scale(\n\t.param .u64 accelkit_scale_param_0,\n\t.param .f32 accelkit_scale_param_1,\n\t.param .u32 accelkit_scale_param_2\n)",
	} {
		if !strings.Contains(ptx, want) {
			t.Errorf("PTX lacks %q:\n%s", want, ptx)
		}
	}
	if r.Lowered != nil {
		t.Errorf("Lowered = %v without name expressions; want nil", r.Lowered)
	}
	if n := lib.Count("nvrtcCompileProgram"); n != 1 {
		t.Errorf("nvrtcCompileProgram called %d times; want 1", n)
	}
	if n := lib.Count("nvrtcGetProgramLog"); n != 1 {
		t.Errorf("nvrtcGetProgramLog called %d times; want 1 (the log is always fetched)", n)
	}
	noLeaks(t, lib)
}

func TestCompileCubin(t *testing.T) {
	c, lib := open(t)
	for _, arch := range []string{"sm_90", "sm_90a", "sm_100f"} {
		r, err := c.Compile(context.Background(), []byte(kernels), nvrtc.Options{Arch: arch})
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != driver.ImageCubin || driver.DetectImage(r.Code) != driver.ImageCubin {
			t.Errorf("%s: Kind = %v, DetectImage = %v; want cubin", arch, r.Kind, driver.DetectImage(r.Code))
		}
		head := "\x7fELFACCELKIT-FAKE-CUBIN " + arch + "\n"
		if !bytes.HasPrefix(r.Code, []byte(head)) || !bytes.Contains(r.Code, []byte(".entry accelkit_scale(")) {
			t.Errorf("%s: cubin = %q...; want %q then PTX", arch, r.Code[:min(len(r.Code), 40)], head)
		}
	}
	if n := lib.Count("nvrtcGetCUBIN"); n != 3 {
		t.Errorf("nvrtcGetCUBIN called %d times; want 3", n)
	}
	if n := lib.Count("nvrtcGetPTX"); n != 0 {
		t.Errorf("nvrtcGetPTX called %d times for cubin targets; want 0", n)
	}
	noLeaks(t, lib)
}

func TestCompileErrorCarriesLog(t *testing.T) {
	c, lib := open(t)
	src := kernels + "\n#error the kernels need a feature flag\n"
	_, err := c.Compile(context.Background(), []byte(src), nvrtc.Options{Name: "ops.cu", Arch: "sm_80"})
	var ce *nvrtc.CompileError
	if !errors.As(err, &ce) || !errors.Is(err, nvrtc.ErrCompile) {
		t.Fatalf("err = %v; want a *CompileError matching ErrCompile", err)
	}
	if ce.Program != "ops.cu" || ce.Arch != "sm_80" || ce.Code != 6 || ce.Name != "NVRTC_ERROR_COMPILATION" {
		t.Errorf("CompileError = %+v; want ops.cu, sm_80, 6, NVRTC_ERROR_COMPILATION", ce)
	}
	if !strings.Contains(ce.Log, "ops.cu(12): catastrophic error: #error directive: the kernels need a feature flag") {
		t.Errorf("Log = %q; want the #error with its file and line", ce.Log)
	}
	if msg := err.Error(); !strings.Contains(msg, "ops.cu for sm_80") || !strings.Contains(msg, "the kernels need a feature flag") {
		t.Errorf("Error() = %q; want the program, arch and log", msg)
	}
	noLeaks(t, lib)
}

func TestCompileErrorTruncatesLongLog(t *testing.T) {
	e := &nvrtc.CompileError{Program: "p.cu", Arch: "sm_90", Code: 6, Name: "NVRTC_ERROR_COMPILATION", Log: strings.Repeat("x", 20000)}
	msg := e.Error()
	if len(msg) > 9000 || !strings.Contains(msg, "more bytes in CompileError.Log") {
		t.Errorf("Error() is %d bytes, ends %q; want it cut near 8 KiB with a pointer to Log", len(msg), msg[max(0, len(msg)-60):])
	}
	if e.Log == "" || len(e.Log) != 20000 {
		t.Error("Error changed Log")
	}
}

func TestWarningsInLogOnSuccess(t *testing.T) {
	c, _ := open(t)
	r, err := c.Compile(context.Background(), []byte("#warning slow path\n"+kernels), nvrtc.Options{Arch: "compute_80"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Log, "program.cu(1): warning") || !strings.Contains(r.Log, "slow path") {
		t.Errorf("Log = %q; want the warning, with the default program name", r.Log)
	}
}

func TestUnsupportedArchRefusedBeforeCompiling(t *testing.T) {
	lib := nvrtctest.Build(t)
	t.Setenv(nvrtctest.EnvArchs, "75,80,90")
	c, err := nvrtc.Open(lib.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"sm_100", "compute_70", "sm_86a", "", "sm90", "gfx90a", "sm_090", "compute_90x", "sm_9"} {
		_, err := c.Compile(context.Background(), []byte(kernels), nvrtc.Options{Arch: arch})
		if !errors.Is(err, nvrtc.ErrUnsupportedArch) {
			t.Errorf("Arch %q: err = %v; want ErrUnsupportedArch", arch, err)
		}
	}
	_, err = c.Compile(context.Background(), []byte(kernels), nvrtc.Options{Arch: "sm_100"})
	if msg := err.Error(); !strings.Contains(msg, "75, 80, 90") || !strings.Contains(msg, "sm_100") {
		t.Errorf("err = %q; want the arch and the supported list", msg)
	}
	if n := lib.Count("nvrtcCreateProgram") + lib.Count("nvrtcCompileProgram"); n != 0 {
		t.Errorf("NVRTC was called %d times for refused architectures; want 0", n)
	}
	if _, err := c.Compile(context.Background(), []byte(kernels), nvrtc.Options{Arch: "sm_90a"}); err != nil {
		t.Errorf("sm_90a with 90 supported: %v", err)
	}
}

func TestVersionAndSupportedArchs(t *testing.T) {
	lib := nvrtctest.Build(t)
	c, err := nvrtc.Open(lib.Path)
	if err != nil {
		t.Fatal(err)
	}
	if maj, min := c.Version(); maj != 13 || min != 0 || c.VersionString() != "13.0" || c.Path() != lib.Path {
		t.Errorf("Version = %d.%d (%q), Path %q; want 13.0 at %s", maj, min, c.VersionString(), c.Path(), lib.Path)
	}
	if a := c.SupportedArchs(); !slices.IsSorted(a) || !slices.Contains(a, 75) || !slices.Contains(a, 120) || slices.Contains(a, 70) {
		t.Errorf("SupportedArchs = %v; want CUDA 13's sorted list, 75 .. 121", a)
	}
	t.Setenv(nvrtctest.EnvVersion, "12.8")
	t.Setenv(nvrtctest.EnvArchs, "90,75,80")
	c2, err := nvrtc.Open(lib.Path)
	if err != nil {
		t.Fatal(err)
	}
	if c2.VersionString() != "12.8" || !slices.Equal(c2.SupportedArchs(), []int{75, 80, 90}) {
		t.Errorf("with the variables set: %s %v; want 12.8 [75 80 90]", c2.VersionString(), c2.SupportedArchs())
	}
	c2.SupportedArchs()[0] = 1
	if c2.SupportedArchs()[0] != 75 {
		t.Error("SupportedArchs returned the Compiler's own slice")
	}
	if c.VersionString() != "13.0" {
		t.Error("a later Open changed an earlier Compiler")
	}
}

func TestNameExpressions(t *testing.T) {
	c, lib := open(t)
	src := kernels + `
__global__ void axpy(float a, const float* __restrict__ x, float* y, int n) {}

template <typename T>
__global__ void fill(T* x, T v, int n) {}
`
	exprs := []string{"accelkit_scale", "axpy", "fill<float>", "fill<double>", "axpy"}
	r, err := c.Compile(context.Background(), []byte(src), nvrtc.Options{Arch: "compute_80", NameExpressions: exprs})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"accelkit_scale": "accelkit_scale",
		"axpy":           "_Z4axpyfPKfPfi",
		"fill<float>":    "_Z4fillIfEvPT_S0_i",
		"fill<double>":   "_Z4fillIdEvPT_S0_i",
	}
	if fmt.Sprint(r.Lowered) != fmt.Sprint(want) {
		t.Errorf("Lowered = %v; want %v", r.Lowered, want)
	}
	for _, name := range want {
		if !strings.Contains(string(r.Code), ".entry "+name+"(") {
			t.Errorf("PTX has no entry %s", name)
		}
	}
	if !strings.Contains(string(r.Code), ".entry _Z4fillIdEvPT_S0_i(\n\t.param .u64 _Z4fillIdEvPT_S0_i_param_0,\n\t.param .f64 _Z4fillIdEvPT_S0_i_param_1,") {
		t.Errorf("fill<double> parameters are not (pointer, double, ...):\n%s", r.Code)
	}
	if n := lib.Count("nvrtcAddNameExpression"); n != 4 {
		t.Errorf("nvrtcAddNameExpression called %d times; want 4 (the repeat dropped)", n)
	}

	_, err = c.Compile(context.Background(), []byte(src), nvrtc.Options{Arch: "compute_80", NameExpressions: []string{"nosuch"}})
	var ce *nvrtc.CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, `identifier "nosuch" is undefined`) {
		t.Errorf("unknown name expression: err = %v; want a CompileError saying it is undefined", err)
	}
	noLeaks(t, lib)
}

func TestHeaders(t *testing.T) {
	c, lib := open(t)
	src := "#include \"ops.h\"\n#include <types.h>\n"
	hdrs := []nvrtc.Header{
		{Name: "ops.h", Source: "extern \"C\" __global__ void from_header(float* x) {}\n"},
		{Name: "types.h", Source: "// nothing\n"},
	}
	r, err := c.Compile(context.Background(), []byte(src), nvrtc.Options{Arch: "compute_75", Headers: hdrs})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Code), ".entry from_header(") {
		t.Errorf("the header's kernel is missing:\n%s", r.Code)
	}
	_, err = c.Compile(context.Background(), []byte(src), nvrtc.Options{Arch: "compute_75", Headers: hdrs[:1]})
	var ce *nvrtc.CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, `cannot open source file "types.h"`) {
		t.Errorf("missing header: err = %v; want a CompileError naming it", err)
	}
	noLeaks(t, lib)
}

func TestFlags(t *testing.T) {
	c, lib := open(t)
	r, err := c.Compile(context.Background(), []byte(kernels), nvrtc.Options{Arch: "compute_90", Flags: []string{"-std=c++17", "-DN=4", "--use_fast_math"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Code), "// Options: -arch=compute_90 -std=c++17 -DN=4 --use_fast_math\n") {
		t.Errorf("the options did not reach NVRTC as given:\n%s", r.Code)
	}
	_, err = c.Compile(context.Background(), []byte(kernels), nvrtc.Options{Arch: "compute_90", Flags: []string{"--bogus"}})
	var ce *nvrtc.CompileError
	if !errors.As(err, &ce) || ce.Name != "NVRTC_ERROR_INVALID_OPTION" || !strings.Contains(ce.Log, "--bogus") {
		t.Errorf("unknown option: err = %v; want a CompileError with NVRTC_ERROR_INVALID_OPTION", err)
	}
	before := lib.Count("nvrtcCompileProgram")
	for _, f := range []string{"-arch=sm_80", "--gpu-architecture=compute_80", "-arch"} {
		_, err = c.Compile(context.Background(), []byte(kernels), nvrtc.Options{Arch: "compute_90", Flags: []string{f}})
		if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "Options.Arch") {
			t.Errorf("flag %q: err = %v; want ErrInvalidValue pointing at Options.Arch", f, err)
		}
	}
	if lib.Count("nvrtcCompileProgram") != before {
		t.Error("a flag setting the architecture reached NVRTC")
	}
}

func TestFailCompileVariable(t *testing.T) {
	c, _ := open(t)
	t.Setenv(nvrtctest.EnvFailCompile, "1")
	_, err := c.Compile(context.Background(), []byte(kernels), nvrtc.Options{Arch: "sm_90"})
	var ce *nvrtc.CompileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Log, nvrtctest.EnvFailCompile) {
		t.Errorf("err = %v; want a CompileError naming %s", err, nvrtctest.EnvFailCompile)
	}
}

func TestBadInputsRefused(t *testing.T) {
	c, lib := open(t)
	for name, opts := range map[string]nvrtc.Options{
		"NUL in a flag":            {Arch: "sm_90", Flags: []string{"-DA=\x00"}},
		"NUL in a name expression": {Arch: "sm_90", NameExpressions: []string{"a\x00b"}},
		"empty name expression":    {Arch: "sm_90", NameExpressions: []string{""}},
		"NUL in a header":          {Arch: "sm_90", Headers: []nvrtc.Header{{Name: "h", Source: "\x00"}}},
		"header without a name":    {Arch: "sm_90", Headers: []nvrtc.Header{{Source: "x"}}},
		"header twice":             {Arch: "sm_90", Headers: []nvrtc.Header{{Name: "h"}, {Name: "h"}}},
		"NUL in the name":          {Arch: "sm_90", Name: "a\x00"},
	} {
		if _, err := c.Compile(context.Background(), []byte(kernels), opts); !errors.Is(err, driver.ErrInvalidValue) {
			t.Errorf("%s: err = %v; want ErrInvalidValue", name, err)
		}
	}
	if _, err := c.Compile(context.Background(), []byte("a\x00b"), nvrtc.Options{Arch: "sm_90"}); !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "offset 1") {
		t.Errorf("NUL in the source: err = %v; want ErrInvalidValue with the offset", err)
	}
	if n := lib.Count("nvrtcCreateProgram"); n != 0 {
		t.Errorf("bad inputs reached NVRTC %d times", n)
	}
	var zero nvrtc.Compiler
	if _, err := zero.Compile(context.Background(), nil, nvrtc.Options{Arch: "sm_90"}); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("zero Compiler: err = %v; want ErrInvalidValue", err)
	}
	var nilc *nvrtc.Compiler
	if _, err := nilc.Compile(context.Background(), nil, nvrtc.Options{Arch: "sm_90"}); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("nil Compiler: err = %v; want ErrInvalidValue", err)
	}
}

func TestContext(t *testing.T) {
	t.Run("done before", func(t *testing.T) {
		c, lib := open(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Compile(ctx, []byte(kernels), nvrtc.Options{Arch: "sm_90"}); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v; want context.Canceled", err)
		}
		if n := lib.Count("nvrtcCreateProgram"); n != 0 {
			t.Errorf("NVRTC called %d times for a done context", n)
		}
	})
	t.Run("cancelled during", func(t *testing.T) {
		c, lib := open(t)
		t.Setenv(nvrtctest.EnvCompileMS, "10000")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Compile(ctx, []byte(kernels), nvrtc.Options{Arch: "sm_90"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v; want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("cancelled compile took %v", d)
		}
		noLeaks(t, lib)
	})
	t.Run("no flow callback", func(t *testing.T) {
		c, lib := open(t, "nvrtcSetFlowCallback")
		t.Setenv(nvrtctest.EnvCompileMS, "100")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		r, err := c.Compile(ctx, []byte(kernels), nvrtc.Options{Arch: "sm_90"})
		if err != nil || r == nil {
			t.Errorf("err = %v; want the compile to run to its end and be returned", err)
		}
		noLeaks(t, lib)
	})
}

func TestConcurrentCompiles(t *testing.T) {
	c, lib := open(t)
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				name := fmt.Sprintf("k_%d_%d", w, i)
				src := fmt.Sprintf("__global__ void %s(float* x, int n) {}\n", name)
				arch := []string{"sm_90", "compute_80"}[i%2]
				r, err := c.Compile(context.Background(), []byte(src), nvrtc.Options{Arch: arch, NameExpressions: []string{name}})
				if err != nil {
					errs <- err
					continue
				}
				want := fmt.Sprintf("_Z%d%sPfi", len(name), name)
				if r.Lowered[name] != want || !bytes.Contains(r.Code, []byte(".entry "+want+"(")) {
					errs <- fmt.Errorf("%s: lowered %q, want %q; code has it: %v", name, r.Lowered[name], want, bytes.Contains(r.Code, []byte(want)))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := lib.Count("nvrtcCompileProgram"); n != workers*each {
		t.Errorf("nvrtcCompileProgram called %d times; want %d", n, workers*each)
	}
	noLeaks(t, lib)
}

func TestOpenFromEnvironment(t *testing.T) {
	lib := nvrtctest.Build(t)
	t.Setenv(nvrtc.EnvLibrary, lib.Path)
	c, err := nvrtc.Open("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Path() != lib.Path {
		t.Errorf("Path = %q; want %q from %s", c.Path(), lib.Path, nvrtc.EnvLibrary)
	}
}

func TestOpenLibraryLackingSymbol(t *testing.T) {
	lib := nvrtctest.Build(t, "nvrtcGetSupportedArchs")
	_, err := nvrtc.Open(lib.Path)
	if !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "no entry point nvrtcGetSupportedArchs") {
		t.Errorf("Open = %v; want ErrNotSupported naming nvrtcGetSupportedArchs", err)
	}
}
