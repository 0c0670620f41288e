package nvrtc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/accelkit/accelkit/driver"
)

// EnvLibrary names the environment variable that points Open at a libnvrtc
// when Open is given no path.
const EnvLibrary = "ACCELKIT_LIBNVRTC"

// defaultLibraries are the sonames Open tries, in order, with neither a path
// nor EnvLibrary: the CUDA 13 and 12 runtimes, then the unversioned
// development link.
var defaultLibraries = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}

// Sentinel errors.
var (
	// ErrCompile is a failed compile. A *CompileError (nvrtcCompileProgram
	// failed; the log says why) unwraps to it, and so does the failure of
	// any other NVRTC call made by Compile.
	ErrCompile = errors.New("nvrtc: compile failed")
	// ErrUnsupportedArch is an Options.Arch that is malformed or that the
	// loaded NVRTC does not list in nvrtcGetSupportedArchs. Compile refuses
	// it before NVRTC compiles anything.
	ErrUnsupportedArch = errors.New("nvrtc: unsupported architecture")
)

// Compiler is one loaded libnvrtc. It is immutable after Open and safe for
// concurrent use: each Compile creates, compiles and destroys its own
// nvrtcProgram inside one cgo call, and NVRTC allows concurrent calls on
// distinct programs, so Compile takes no lock. The library is never
// unloaded: it lives for the rest of the process.
type Compiler struct {
	lib   *lib
	path  string
	major int
	minor int
	archs []int // sorted, from nvrtcGetSupportedArchs
}

// Path returns the library Open loaded, as it was passed to dlopen.
func (c *Compiler) Path() string { return c.path }

// Version returns nvrtcVersion's major and minor numbers.
func (c *Compiler) Version() (major, minor int) { return c.major, c.minor }

// VersionString returns the version as "major.minor", such as "13.0".
func (c *Compiler) VersionString() string { return fmt.Sprintf("%d.%d", c.major, c.minor) }

// SupportedArchs returns the architectures the library compiles for, in
// ascending order, as nvrtcGetSupportedArchs reports them: 75 for sm_75 and
// compute_75. The slice is the caller's.
func (c *Compiler) SupportedArchs() []int { return slices.Clone(c.archs) }

// Header is a header a program may #include by Name, with its Source.
type Header struct{ Name, Source string }

// Options configure one Compile.
type Options struct {
	// Name is the program's name in the log and in __FILE__; "" is
	// "program.cu".
	Name string
	// Arch is the target, required: "sm_90" (also "sm_90a", "sm_100f") for
	// a cubin, "compute_90" (also "compute_90a", "compute_100f") for PTX.
	// Its number must be one of SupportedArchs.
	Arch string
	// Flags are further NVRTC options, passed verbatim after -arch
	// ("-std=c++17", "-DN=4", "--use_fast_math"). They may not set the
	// architecture: that is Arch's job.
	Flags []string
	// NameExpressions are expressions naming __global__ functions (or
	// __device__/__constant__ variables) whose lowered names Result.Lowered
	// returns, as cuda.core's name_expressions: "vector_add",
	// "scale<float>".
	NameExpressions []string
	// Headers are the sources the program may #include by name.
	Headers []Header
}

// Result is a successful compile.
type Result struct {
	// Code is the image: a cubin for an sm_ target, PTX text (without the
	// trailing NUL) for a compute_ target.
	Code []byte
	// Kind is driver.ImageCubin for an sm_ target, driver.ImagePTX for a
	// compute_ target.
	Kind driver.ImageKind
	// Log is NVRTC's compile log, warnings included; often empty.
	Log string
	// Lowered maps each of Options.NameExpressions to its lowered (mangled)
	// name, the name to look the kernel up by in the loaded module. Nil when
	// there were no name expressions.
	Lowered map[string]string
}

// CompileError is a failed nvrtcCompileProgram: the program, the target, the
// nvrtcResult and its name, and the compile log that says what was wrong.
type CompileError struct {
	Program string // Options.Name, or "program.cu"
	Arch    string // Options.Arch
	Log     string // the full compile log
	Code    int    // the nvrtcResult, such as 6
	Name    string // its name from nvrtcGetErrorString, such as "NVRTC_ERROR_COMPILATION"
}

// maxLogInError bounds the log text Error includes; the Log field has all.
const maxLogInError = 8 << 10

func (e *CompileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nvrtc: compiling %s for %s: %s (%d)", e.Program, e.Arch, e.Name, e.Code)
	log := strings.TrimSpace(e.Log)
	if log == "" {
		return b.String()
	}
	if len(log) > maxLogInError {
		rest := len(log) - maxLogInError
		log = fmt.Sprintf("%s\n... (%d more bytes in CompileError.Log)", log[:maxLogInError], rest)
	}
	b.WriteString(":\n")
	b.WriteString(log)
	return b.String()
}

// Unwrap returns ErrCompile.
func (e *CompileError) Unwrap() error { return ErrCompile }

// defaultProgramName is the program name for an empty Options.Name.
const defaultProgramName = "program.cu"

// Compile compiles CUDA C++ src for opts.Arch and returns the image, the log
// and the lowered names of opts.NameExpressions.
//
// A malformed Arch, or one whose number SupportedArchs lacks, is refused
// with ErrUnsupportedArch before NVRTC is called. A failed compile is a
// *CompileError carrying the log. The nvrtcProgram is destroyed before
// Compile returns, whatever happened.
//
// ctx is checked before compiling. NVRTC compiles inside one blocking call:
// where the library has nvrtcSetFlowCallback, a ctx done during the compile
// cancels it (the error wraps ctx.Err()); older libraries cannot be
// interrupted, and their compile runs to its end and is returned.
func (c *Compiler) Compile(ctx context.Context, src []byte, opts Options) (*Result, error) {
	if c == nil || c.lib == nil {
		return nil, fmt.Errorf("nvrtc: Compile on a Compiler not made by Open: %w", driver.ErrInvalidValue)
	}
	name := opts.Name
	if name == "" {
		name = defaultProgramName
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nvrtc: compile of %s not started: %w", name, err)
	}
	a, err := parseArch(opts.Arch)
	if err != nil {
		return nil, err
	}
	if _, ok := slices.BinarySearch(c.archs, a.number); !ok {
		return nil, fmt.Errorf("nvrtc: %s (architecture %d) is not supported by NVRTC %s at %s; it supports %s: %w",
			opts.Arch, a.number, c.VersionString(), c.path, archList(c.archs), ErrUnsupportedArch)
	}
	if err := checkInputs(src, name, opts); err != nil {
		return nil, err
	}
	return c.lib.compile(ctx, src, name, a, opts)
}

// archList formats archs for a message: "75, 80, 90".
func archList(archs []int) string {
	if len(archs) == 0 {
		return "none"
	}
	s := make([]string, len(archs))
	for i, a := range archs {
		s[i] = strconv.Itoa(a)
	}
	return strings.Join(s, ", ")
}

// checkInputs refuses what cannot cross into C intact (a NUL would cut a
// string short) and flags that would set a second architecture behind
// Arch's back (the caches key on Arch).
func checkInputs(src []byte, name string, opts Options) error {
	if i := strings.IndexByte(string(src), 0); i >= 0 {
		return fmt.Errorf("nvrtc: source of %s has a NUL byte at offset %d: %w", name, i, driver.ErrInvalidValue)
	}
	check := func(what, s string) error {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("nvrtc: %s %q has a NUL byte: %w", what, s, driver.ErrInvalidValue)
		}
		return nil
	}
	if err := check("program name", name); err != nil {
		return err
	}
	for i, f := range opts.Flags {
		if err := check("flag", f); err != nil {
			return err
		}
		if isArchFlag(f) {
			return fmt.Errorf("nvrtc: flag %d %q sets the architecture; set Options.Arch instead: %w", i, f, driver.ErrInvalidValue)
		}
	}
	for _, e := range opts.NameExpressions {
		if e == "" {
			return fmt.Errorf("nvrtc: empty name expression: %w", driver.ErrInvalidValue)
		}
		if err := check("name expression", e); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, h := range opts.Headers {
		if h.Name == "" {
			return fmt.Errorf("nvrtc: header with an empty name: %w", driver.ErrInvalidValue)
		}
		if seen[h.Name] {
			return fmt.Errorf("nvrtc: header %q given twice: %w", h.Name, driver.ErrInvalidValue)
		}
		seen[h.Name] = true
		if err := check("header name", h.Name); err != nil {
			return err
		}
		if i := strings.IndexByte(h.Source, 0); i >= 0 {
			return fmt.Errorf("nvrtc: source of header %q has a NUL byte at offset %d: %w", h.Name, i, driver.ErrInvalidValue)
		}
	}
	return nil
}

// isArchFlag reports whether f is NVRTC's -arch / --gpu-architecture
// option, in any of its spellings.
func isArchFlag(f string) bool {
	for _, p := range []string{"-arch", "--gpu-architecture", "-gpu-architecture", "--arch"} {
		if f == p || strings.HasPrefix(f, p+"=") {
			return true
		}
	}
	return false
}

// arch is a parsed Options.Arch.
type arch struct {
	virtual bool   // compute_ (PTX) rather than sm_ (cubin)
	number  int    // 90 for sm_90a
	suffix  string // "", "a" or "f"
}

// maxArch bounds the number so that parsing never overflows; NVIDIA's
// largest today is 121.
const maxArch = 9999

// parseArch parses sm_NN, sm_NNa, sm_NNf, compute_NN, compute_NNa and
// compute_NNf. A malformed one wraps ErrUnsupportedArch and says what is
// valid.
func parseArch(s string) (arch, error) {
	bad := func(why string) (arch, error) {
		return arch{}, fmt.Errorf("nvrtc: architecture %q %s; want sm_NN, sm_NNa or sm_NNf for a cubin, compute_NN, compute_NNa or compute_NNf for PTX (such as sm_90 or compute_90): %w",
			s, why, ErrUnsupportedArch)
	}
	if s == "" {
		return bad("is empty (Options.Arch is required)")
	}
	var a arch
	rest, ok := strings.CutPrefix(s, "sm_")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "compute_"); !ok {
			return bad("has neither the sm_ nor the compute_ prefix")
		}
		a.virtual = true
	}
	digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
	if digits == 0 {
		return bad("has no number")
	}
	if rest[0] == '0' {
		return bad("has a leading zero")
	}
	if digits > 4 {
		return bad("has too large a number")
	}
	a.number, _ = strconv.Atoi(rest[:digits])
	if a.number < 10 || a.number > maxArch {
		return bad("has a number outside 10..9999")
	}
	switch suf := rest[digits:]; suf {
	case "", "a", "f":
		a.suffix = suf
	default:
		return bad(fmt.Sprintf("has the suffix %q (only a or f)", suf))
	}
	return a, nil
}

// String formats a as NVRTC's -arch value.
func (a arch) String() string {
	p := "sm_"
	if a.virtual {
		p = "compute_"
	}
	return p + strconv.Itoa(a.number) + a.suffix
}

// candidates are the libraries Open tries: path, else $ACCELKIT_LIBNVRTC,
// else the default sonames. explicit reports a path or variable.
func candidates(path string) (list []string, explicit string) {
	if path != "" {
		return []string{path}, "the path given to Open"
	}
	if p := os.Getenv(EnvLibrary); p != "" {
		return []string{p}, EnvLibrary
	}
	return defaultLibraries, ""
}

// installHint says what to install or set when no library loads.
const installHint = "install the CUDA NVRTC library (the CUDA Toolkit's cuda-nvrtc package, or pip's nvidia-cuda-nvrtc) " +
	"where the dynamic loader finds it, or set " + EnvLibrary + " to the path of libnvrtc.so"
