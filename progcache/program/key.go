package program

// The key of a Load: the source and options as progcache.KeyInput, the
// toolchain probes, and the NVRTC flags the same options become, so the
// key cannot drift from what is compiled (both are made from one Options
// value here).

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/nvrtc"
	"github.com/accelkit/accelkit/progcache"
)

// Names of the toolchain components Load puts in every key.
const (
	ComponentCompiler = "nvrtc"    // the compiler's VersionString
	ComponentDriver   = "driver"   // the device's driver version
	ComponentLinker   = "linker"   // none runs yet: "none"
	ComponentAccelkit = "accelkit" // this module's version (ModuleVersion)
)

// unavailable is the prefix of a probe that failed: the failure is part of
// the key, so machines whose probes fail differently never share an entry.
const unavailable = "unavailable: "

// modulePath is this module's path, looked up in the build information.
const modulePath = "github.com/accelkit/accelkit/progcache/program"

var moduleVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return unavailable + "the binary carries no build information"
	}
	return versionFrom(bi)
})

// ModuleVersion is the version of this module as the running binary
// records it (runtime/debug.ReadBuildInfo): "v0.1.0" when built as a
// dependency at a release; "(devel)" when it is the main module, as in
// its own tests, followed by " vcs.revision=..." and " vcs.modified=..."
// when the go command stamped them (a build of a checkout with -buildvcs);
// "unavailable: ..." when the binary carries no build information. It is
// the "accelkit" component of every key: a change to how Load compiles
// ships as a new version, so its entries miss. A "(devel)" build without a
// revision cannot tell its own changes apart: clear the cache after
// changing this module's code by hand.
func ModuleVersion() string { return moduleVersion() }

func versionFrom(bi *debug.BuildInfo) string {
	v := ""
	if bi.Main.Path == modulePath {
		v = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath {
			v = d.Version
			if d.Replace != nil {
				v = d.Replace.Version
				if v == "" {
					v = "(devel)" // a directory replacement, as go.work makes
				}
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if v == "(devel)" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
				v += " " + s.Key + "=" + s.Value
			}
		}
	}
	return v
}

// driverVersion probes the driver version of dev: the "driver_version"
// property CUDA devices report; "simulated" on the sim, whose kernels
// depend on no driver; else a labelled failure.
func driverVersion(dev driver.Device) string {
	pd, ok := dev.(driver.PropertiesDevice)
	if !ok {
		return unavailable + fmt.Sprintf("device %q (%T) does not describe itself (no driver.PropertiesDevice)", dev.Name(), dev)
	}
	p, err := pd.Properties()
	if err != nil {
		return unavailable + err.Error()
	}
	if v := p.Attributes["driver_version"]; v != "" {
		return v
	}
	if p.Simulated {
		return "simulated"
	}
	return unavailable + fmt.Sprintf("device %q reports no driver_version", p.Name)
}

// compilerVersion probes the compiler's version.
func compilerVersion(c Compiler) string {
	if v := c.VersionString(); v != "" {
		return v
	}
	return unavailable + fmt.Sprintf("the compiler (%T) reports no version", c)
}

// toolchain returns the probes of a Loader, sorted by name (MakeKey sorts
// them too). The driver probe runs once per Loader: the driver of a live
// device does not change.
func (l *Loader) toolchain() []progcache.Component {
	return []progcache.Component{
		{Name: ComponentAccelkit, Version: ModuleVersion()},
		{Name: ComponentDriver, Version: l.driverVer},
		// No linker runs: Load compiles one translation unit with NVRTC
		// and loads what it gives. Linking (nvJitLink, for LTO-IR and
		// relocatable code) will put its version here.
		{Name: ComponentLinker, Version: "none"},
		{Name: ComponentCompiler, Version: compilerVersion(l.compiler)},
	}
}

// arch resolves the target architecture: Options.Arch when given, else the
// device's: sm_XY (cubin) from a compute capability X.Y, compute_XX (PTX,
// which the driver compiles for the device) when the compiler does not
// know the device's architecture, and on the sim, which runs PTX, the
// lowest architecture the compiler supports.
func (l *Loader) arch(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	pd, ok := l.dev.(driver.PropertiesDevice)
	if !ok {
		return "", fmt.Errorf("program: device %q does not describe itself, so its architecture is unknown: set Source.Options.Arch (e.g. \"sm_90\"): %w", l.dev.Name(), driver.ErrInvalidValue)
	}
	p, err := pd.Properties()
	if err != nil {
		return "", fmt.Errorf("program: the device's architecture: %w", err)
	}
	var archs []int
	if l.compiler != nil {
		archs = l.compiler.SupportedArchs()
	}
	if p.Simulated {
		if len(archs) == 0 {
			return "", fmt.Errorf("program: the compiler lists no supported architectures to compile PTX for the sim with: set Source.Options.Arch (e.g. \"compute_75\"): %w", driver.ErrInvalidValue)
		}
		return "compute_" + strconv.Itoa(slices.Min(archs)), nil
	}
	major, minor, ok := strings.Cut(p.ComputeCapability, ".")
	x, err1 := strconv.Atoi(major)
	y, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || x < 0 || y < 0 || y > 9 {
		return "", fmt.Errorf("program: device %q has compute capability %q, not MAJOR.MINOR: set Source.Options.Arch (e.g. \"sm_90\"): %w", p.Name, p.ComputeCapability, driver.ErrInvalidValue)
	}
	cc := x*10 + y
	if len(archs) > 0 && !slices.Contains(archs, cc) {
		// A device newer than the compiler: PTX of the newest
		// architecture it knows, which the driver compiles for the device.
		if newest := slices.Max(archs); cc > newest {
			return "compute_" + strconv.Itoa(newest), nil
		}
	}
	return "sm_" + strconv.Itoa(cc), nil
}

// targetOf is the output kind an architecture gives: compute_XX is PTX,
// sm_XX (and sm_XXa, sm_XXf) a cubin.
func targetOf(arch string) (string, error) {
	switch {
	case strings.HasPrefix(arch, "compute_"):
		return "ptx", nil
	case strings.HasPrefix(arch, "sm_"):
		return "cubin", nil
	}
	return "", fmt.Errorf("program: architecture %q: want sm_XX (a cubin) or compute_XX (PTX): %w", arch, driver.ErrInvalidValue)
}

// archFlags are the spellings of the architecture option, which Load
// passes to the compiler itself from Options.Arch.
var archFlags = []string{"-arch", "--gpu-architecture"}

// flags maps o to NVRTC options, one per element. o.Arch is left out: it is
// the compiler's Arch. Extra flags follow the typed ones verbatim; an
// architecture among them is refused, since it would contradict o.Arch.
func flags(o progcache.Options) ([]string, error) {
	var f []string
	for _, e := range o.Extra {
		for _, a := range archFlags {
			if e == a || strings.HasPrefix(e, a+"=") {
				return nil, fmt.Errorf("program: Options.Extra holds %q: give the architecture in Options.Arch, which Load hands the compiler itself: %w", e, driver.ErrInvalidValue)
			}
		}
	}
	if o.Std != "" {
		f = append(f, "--std="+o.Std)
	}
	for _, d := range o.Defines {
		if d.Undef {
			f = append(f, "--undefine-macro="+d.Name)
		} else {
			f = append(f, "--define-macro="+d.Name+"="+d.Value)
		}
	}
	for _, p := range o.IncludePaths {
		f = append(f, "--include-path="+p)
	}
	for _, p := range o.PreIncludes {
		f = append(f, "--pre-include="+p)
	}
	if o.Debug {
		f = append(f, "--device-debug")
	}
	if o.LineInfo {
		f = append(f, "--generate-line-info")
	}
	if o.FastMath {
		f = append(f, "--use_fast_math")
	}
	if o.Relocatable {
		f = append(f, "--relocatable-device-code=true")
	}
	if o.MaxRegisters != 0 {
		f = append(f, "--maxrregcount="+strconv.Itoa(o.MaxRegisters))
	}
	return append(f, o.Extra...), nil
}

// headersDigest folds the in-memory headers into the ExtraDigest: they are
// inputs of the compile that the key's sources do not hold. Each field is
// length-prefixed, so no two header lists share a digest.
func headersDigest(extra []byte, hs []nvrtc.Header) []byte {
	if len(hs) == 0 {
		return extra
	}
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	put := func(b []byte) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	put([]byte("accelkit program headers v1"))
	put(extra)
	for _, hd := range hs {
		put([]byte(hd.Name))
		put([]byte(hd.Source))
	}
	return h.Sum(nil)
}

// plan is what one Load compiles, and under which key.
type plan struct {
	key   progcache.Key
	in    progcache.KeyInput
	opts  nvrtc.Options
	code  []byte
	arch  string
	image driver.ImageKind
}

// plan resolves the architecture, makes the key and the compiler options.
func (l *Loader) plan(_ context.Context, src Source) (*plan, error) {
	name := src.Name
	if name == "" {
		name = "program.cu"
	}
	o := src.Options
	arch, err := l.arch(o.Arch)
	if err != nil {
		return nil, err
	}
	o.Arch = arch
	target, err := targetOf(arch)
	if err != nil {
		return nil, err
	}
	fl, err := flags(o)
	if err != nil {
		return nil, err
	}
	in := progcache.KeyInput{
		Sources:         []progcache.Source{{Name: name, Code: src.Code}},
		CodeType:        "c++",
		Target:          target,
		Options:         o,
		NameExpressions: src.NameExpressions,
		Toolchain:       l.toolchain(),
		ExtraDigest:     src.ExtraDigest,
	}
	if len(src.Headers) > 0 {
		// The headers fill the ExtraDigest; the options must still not
		// read files that no digest covers.
		if len(src.ExtraDigest) == 0 {
			if _, err := progcache.MakeKey(in); err != nil {
				return nil, fmt.Errorf("program: %w", err)
			}
		}
		in.ExtraDigest = headersDigest(src.ExtraDigest, src.Headers)
	}
	k, err := progcache.MakeKey(in)
	if err != nil {
		return nil, fmt.Errorf("program: %w", err)
	}
	image := driver.ImageCubin
	if target == "ptx" {
		image = driver.ImagePTX
	}
	return &plan{
		key: k, in: in, code: src.Code, arch: arch, image: image,
		opts: nvrtc.Options{Name: name, Arch: arch, Flags: fl, NameExpressions: src.NameExpressions, Headers: src.Headers},
	}, nil
}
