// Package nvrtctest builds a fake libnvrtc for tests of code that compiles
// through driver/nvrtc, in this module or any other.
//
// Build compiles the fake's C source (embedded in this package, so it works
// from the module cache too) once per process with the system C compiler
// ($CC, else cc), then links one shared library per call into the test's
// temporary directory. Each library is its own file without a soname, so
// every Build is an independent instance with its own counters. Point
// nvrtc.Open at Lib.Path, or set ACCELKIT_LIBNVRTC to it.
//
// The fake reads these variables when it is called, so t.Setenv changes a
// loaded instance's behaviour:
//   - EnvVersion ("12.8"): what nvrtcVersion reports (default 13.0);
//   - EnvArchs ("75,80,90"): what nvrtcGetSupportedArchs reports;
//   - EnvFailCompile ("1"): every compile fails, with a log saying so;
//   - EnvCompileMS ("500"): each compile takes that long, asking the
//     nvrtcSetFlowCallback callback every millisecond whether to cancel.
//
// It "compiles" by scanning for `[extern "C"] [template <...>] __global__
// void NAME(params)` and emitting PTX (compute_XX) or a fake cubin (sm_XX:
// "\x7fELF", the line "ACCELKIT-FAKE-CUBIN sm_XX", then the PTX) with an
// .entry per kernel and a .param per parameter. Kernels that are not
// extern "C" get an Itanium-style mangled name, and template kernels exist
// as the name expressions instantiate them ("scale<float>"). #include finds
// only the program's headers; #error fails the compile with its text in the
// log; #warning puts a warning in a successful compile's log. Unknown
// options and architectures outside the supported list are
// NVRTC_ERROR_INVALID_OPTION.
package nvrtctest

import _ "embed"

// Source is the fake libnvrtc's C source.
//
//go:embed testdata/fakenvrtc.c
var Source string

// Variables the fake reads at call time.
const (
	EnvVersion     = "ACCELKIT_FAKENVRTC_VERSION"
	EnvArchs       = "ACCELKIT_FAKENVRTC_ARCHS"
	EnvFailCompile = "ACCELKIT_FAKENVRTC_FAIL_COMPILE"
	EnvCompileMS   = "ACCELKIT_FAKENVRTC_COMPILE_MS"
)
