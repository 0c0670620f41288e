package progcache

import (
	"errors"
	"strings"
	"testing"
)

// withExtra is baseInput with Extra flags and, when digest is set, an
// ExtraDigest.
func withExtra(digest bool, extra ...string) KeyInput {
	in := baseInput()
	in.Options.Extra = extra
	if digest {
		in.ExtraDigest = []byte("headers")
	}
	return in
}

// TestMakeKeyFlagValuesDistinct lists pairs of command lines that mean
// different things and so must get different keys. Most of them collided
// when a pass-through flag's value was parsed as a typed flag.
func TestMakeKeyFlagValuesDistinct(t *testing.T) {
	cases := []struct {
		name string
		a, b KeyInput
	}{
		// The value -G goes to ptxas in one, to the compiler in the other.
		{"-Xptxas value is not the compiler's -G",
			withExtra(false, "-Xptxas", "-G", "-lineinfo"), withExtra(false, "-G", "-Xptxas", "-lineinfo")},
		{"--ptxas-options value is not the compiler's -G",
			withExtra(false, "--ptxas-options", "-G", "-lineinfo"), withExtra(false, "-G", "--ptxas-options", "-lineinfo")},
		{"pass-through -G vs Options.Debug",
			withExtra(false, "-Xptxas", "-G", "-lineinfo"),
			func() KeyInput { in := withExtra(false, "-Xptxas", "-lineinfo"); in.Options.Debug = true; return in }()},
		{"-Xcompiler -DX vs -DX",
			withExtra(false, "-Xcompiler", "-DX", "-G"), withExtra(false, "-DX", "-Xcompiler", "-G")},
		{"-Xcompiler -UX vs -UX",
			withExtra(false, "-DX=1", "-Xcompiler", "-UX", "-G"), withExtra(false, "-DX=1", "-UX", "-Xcompiler", "-G")},
		{"-Xptxas -maxrregcount vs -maxrregcount",
			withExtra(false, "-Xptxas", "-maxrregcount=32", "-G"), withExtra(false, "-maxrregcount=32", "-Xptxas", "-G")},
		{"-Xnvlink -arch vs -arch",
			withExtra(false, "-Xnvlink", "-arch=sm_90", "-G"), withExtra(false, "-arch=sm_90", "-Xnvlink", "-G")},
		{"-Xptxas -I vs -I",
			withExtra(true, "-Xptxas", "-I/x", "-G"), withExtra(true, "-I/x", "-Xptxas", "-G")},
		{"-Xcompiler -I vs -I",
			withExtra(true, "-Xcompiler", "-I/x", "-G"), withExtra(true, "-I/x", "-Xcompiler", "-G")},
		{"-Xlinker -rdc vs -rdc",
			withExtra(false, "-Xlinker", "-rdc=true", "-G"), withExtra(false, "-rdc=true", "-Xlinker", "-G")},
		{"order of two pass-through flags",
			withExtra(false, "-Xptxas", "-O3", "-Xptxas", "-O0"), withExtra(false, "-Xptxas", "-O0", "-Xptxas", "-O3")},
		{"order of two pass-through flags, = form",
			withExtra(false, "--ptxas-options=-O3", "--ptxas-options=-O0"), withExtra(false, "--ptxas-options=-O0", "--ptxas-options=-O3")},
		{"same value to two tools",
			withExtra(false, "-Xptxas", "-v"), withExtra(false, "-Xnvlink", "-v")},
		{"same value to host compiler and linker",
			withExtra(false, "-Xcompiler", "-O2"), withExtra(false, "-Xlinker", "-O2")},
		{"-Xarchive vs -Xlinker",
			withExtra(false, "-Xarchive", "-v"), withExtra(false, "--linker-options=-v")},
		{"-Xcudafe vs -Xfatbin",
			withExtra(false, "-Xcudafe", "--diag_suppress=177"), withExtra(false, "-Xfatbin", "--diag_suppress=177")},
		// = joins one value; a separate -G after it is the compiler's.
		{"= form binds one value, the next arg is the compiler's",
			withExtra(false, "-Xptxas=-O3", "-G"), withExtra(false, "-Xptxas=-O3,-G")},
		{"separate form binds one value, the next arg is the compiler's",
			withExtra(false, "-Xptxas", "-O3", "-G"), withExtra(false, "-Xptxas", "-O3,-G")},
		// Values of other value-taking options bind the same way.
		{"-odir value is not -G",
			withExtra(false, "-odir", "-G", "-lineinfo"), withExtra(false, "-G", "-odir", "-lineinfo")},
		{"-ccbin value is not -lineinfo",
			withExtra(false, "-ccbin", "-lineinfo", "-G"), withExtra(false, "-ccbin", "-G", "-lineinfo")},
		{"-gencode values in order",
			withExtra(false, "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"),
			withExtra(false, "-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_80,code=sm_80")},
		{"--fmad value",
			withExtra(false, "--fmad=false"), withExtra(false, "--fmad=true")},
		{"-isystem order",
			withExtra(true, "-isystem", "/a", "-isystem", "/b"), withExtra(true, "-isystem", "/b", "-isystem", "/a")},
		{"-isystem vs -I",
			withExtra(true, "-isystem", "/a"), withExtra(true, "-I", "/a")},
		{"options file",
			withExtra(true, "-optf", "a.opt"), withExtra(true, "-optf", "b.opt")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mustKey(t, tc.a), mustKey(t, tc.b)
			if a == b {
				t.Errorf("different command lines %q and %q share key %v", tc.a.Options.Extra, tc.b.Options.Extra, a)
			}
		})
	}
}

// TestMakeKeyFlagValuesSame lists spellings that nvcc documents as the same
// option (short and long names, value after a space or an =).
func TestMakeKeyFlagValuesSame(t *testing.T) {
	cases := []struct {
		name string
		a, b KeyInput
	}{
		{"-Xptxas -v = --ptxas-options -v", withExtra(false, "-Xptxas", "-v"), withExtra(false, "--ptxas-options", "-v")},
		{"-Xptxas -v = --ptxas-options=-v", withExtra(false, "-Xptxas", "-v"), withExtra(false, "--ptxas-options=-v")},
		{"-Xptxas=-v = --ptxas-options=-v", withExtra(false, "-Xptxas=-v"), withExtra(false, "--ptxas-options=-v")},
		{"value with =", withExtra(false, "-Xptxas", "--def-load-cache=cg"), withExtra(false, "--ptxas-options=--def-load-cache=cg")},
		{"-Xcompiler = --compiler-options", withExtra(false, "-Xcompiler", "-fPIC,-Wall"), withExtra(false, "--compiler-options=-fPIC,-Wall")},
		{"-Xlinker = --linker-options", withExtra(false, "-Xlinker", "--as-needed"), withExtra(false, "--linker-options=--as-needed")},
		{"-Xnvlink = --nvlink-options", withExtra(false, "-Xnvlink=--suppress-stack-size-warning"), withExtra(false, "--nvlink-options", "--suppress-stack-size-warning")},
		{"-Xarchive = --archive-options", withExtra(false, "-Xarchive", "-v"), withExtra(false, "--archive-options=-v")},
		// A typed flag around a pass-through still commutes with it.
		{"typed flags around a pass-through", withExtra(false, "-Xptxas", "-G", "-lineinfo"), withExtra(false, "-lineinfo", "-Xptxas", "-G")},
		{"-ccbin = --compiler-bindir=", withExtra(false, "-ccbin", "gcc-13"), withExtra(false, "--compiler-bindir=gcc-13")},
		{"-fmad false = --fmad=false", withExtra(false, "-fmad", "false"), withExtra(false, "--fmad=false")},
		{"-isystem = --system-include=", withExtra(true, "-isystem", "/x"), withExtra(true, "--system-include=/x")},
		{"-optf = --options-file", withExtra(true, "-optf", "a.opt"), withExtra(true, "--options-file=a.opt")},
		{"-use-pch = --use-pch=", withExtra(true, "-use-pch", "a.pch"), withExtra(true, "--use-pch=a.pch")},
		{"-pch-dir = --pch-dir=", withExtra(true, "-pch-dir", "/p"), withExtra(true, "--pch-dir=/p")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if a, b := mustKey(t, tc.a), mustKey(t, tc.b); a != b {
				t.Errorf("equivalent command lines %q and %q got different keys %v and %v", tc.a.Options.Extra, tc.b.Options.Extra, a, b)
			}
		})
	}
}

// TestMakeKeyPassThroughNotTyped checks that a pass-through value never
// reaches a typed field.
func TestMakeKeyPassThroughNotTyped(t *testing.T) {
	in := withExtra(true, "-Xptxas", "-G", "-Xptxas", "-lineinfo", "-Xcompiler", "-DX=1", "-Xcompiler", "-UY",
		"-Xptxas", "-maxrregcount=32", "-Xnvlink", "-arch=sm_80", "-Xcompiler", "-I/x", "-Xcompiler", "-include",
		"-Xlinker", "-rdc=true", "-Xcompiler", "-std=c++20", "-Xptxas", "-use_fast_math")
	c, err := canonicalize(in)
	if err != nil {
		t.Fatal(err)
	}
	if c.flags != 0 || len(c.defines) != 0 || len(c.includes) != 0 || len(c.preIncl) != 0 || c.maxRegs != 0 || c.arch != "sm_90" || c.std != "" {
		t.Fatalf("pass-through values reached typed fields: flags %b, defines %v, includes %v, pre-includes %v, maxregs %d, arch %q, std %q",
			c.flags, c.defines, c.includes, c.preIncl, c.maxRegs, c.arch, c.std)
	}
	if len(c.extra) != 11 {
		t.Fatalf("extra = %q, want the 11 pass-through flags, each bound to its value", c.extra)
	}
}

// TestMakeKeyFlagRefusals checks the options MakeKey refuses, the error
// each gives, and that the error names the option and says what to do.
func TestMakeKeyFlagRefusals(t *testing.T) {
	const (
		digestHint  = "pass an ExtraDigest"
		uncacheHint = "drop the option, or compile without the cache"
	)
	cases := []struct {
		extra []string
		want  error
		named string // what the message must name
	}{
		{[]string{"-isystem", "/x"}, ErrNeedsExtraDigest, `"-isystem"`},
		{[]string{"-isystem=/x"}, ErrNeedsExtraDigest, `"-isystem=/x"`},
		{[]string{"--system-include", "/x"}, ErrNeedsExtraDigest, `"--system-include"`},
		{[]string{"--system-include=/x"}, ErrNeedsExtraDigest, `"--system-include=/x"`},
		{[]string{"-optf", "opts.txt"}, ErrNeedsExtraDigest, `"-optf"`},
		{[]string{"--options-file=opts.txt"}, ErrNeedsExtraDigest, `"--options-file=opts.txt"`},
		{[]string{"-ldir", "/nvvm/libdevice"}, ErrNeedsExtraDigest, `"-ldir"`},
		{[]string{"--libdevice-directory=/nvvm/libdevice"}, ErrNeedsExtraDigest, `"--libdevice-directory=/nvvm/libdevice"`},
		{[]string{"-I", "/x"}, ErrNeedsExtraDigest, `"-I"`},
		{[]string{"--pre-include=x.h"}, ErrNeedsExtraDigest, `"--pre-include=x.h"`},
		{[]string{"-use-pch", "x.pch"}, ErrNeedsExtraDigest, `"-use-pch"`},
		// The host compiler's include options inside -Xcompiler.
		{[]string{"-Xcompiler", "-I/x"}, ErrNeedsExtraDigest, `"-I/x"`},
		{[]string{"-Xcompiler", "-fPIC,-isystem,/x"}, ErrNeedsExtraDigest, `"-isystem"`},
		{[]string{"--compiler-options=-O2 -include x.h"}, ErrNeedsExtraDigest, `"-include"`},
		{[]string{"-Xcompiler", "@rsp.txt"}, ErrNeedsExtraDigest, `"@rsp.txt"`},
		// Side outputs.
		{[]string{"-keep"}, ErrUncacheable, `"-keep"`},
		{[]string{"--keep"}, ErrUncacheable, `"--keep"`},
		{[]string{"-keep-dir", "/tmp/k"}, ErrUncacheable, `"-keep-dir"`},
		{[]string{"--keep-dir=/tmp/k"}, ErrUncacheable, `"--keep-dir=/tmp/k"`},
		{[]string{"-save-temps"}, ErrUncacheable, `"-save-temps"`},
		{[]string{"--save-temps"}, ErrUncacheable, `"--save-temps"`},
		{[]string{"-M"}, ErrUncacheable, `"-M"`},
		{[]string{"--generate-dependencies"}, ErrUncacheable, `"--generate-dependencies"`},
		{[]string{"-MM"}, ErrUncacheable, `"-MM"`},
		{[]string{"--generate-nonsystem-dependencies"}, ErrUncacheable, `"--generate-nonsystem-dependencies"`},
		{[]string{"-MD"}, ErrUncacheable, `"-MD"`},
		{[]string{"--generate-dependencies-with-compile"}, ErrUncacheable, `"--generate-dependencies-with-compile"`},
		{[]string{"-MMD"}, ErrUncacheable, `"-MMD"`},
		{[]string{"--generate-nonsystem-dependencies-with-compile"}, ErrUncacheable, `"--generate-nonsystem-dependencies-with-compile"`},
		{[]string{"-MF", "k.d"}, ErrUncacheable, `"-MF"`},
		{[]string{"--dependency-output=k.d"}, ErrUncacheable, `"--dependency-output=k.d"`},
		{[]string{"-run"}, ErrUncacheable, `"-run"`},
		{[]string{"--clean-targets"}, ErrUncacheable, `"--clean-targets"`},
		{[]string{"-time", "t.csv"}, ErrUncacheable, `"-time"`},
		{[]string{"--fdevice-time-trace=t.json"}, ErrUncacheable, `"--fdevice-time-trace=t.json"`},
		{[]string{"--create-pch=x.pch"}, ErrUncacheable, `"--create-pch=x.pch"`},
		// The host compiler's side outputs inside -Xcompiler.
		{[]string{"-Xcompiler", "-MMD"}, ErrUncacheable, `"-MMD"`},
		{[]string{"-Xcompiler", "-MF,k.d"}, ErrUncacheable, `"-MF"`},
		{[]string{"-Xcompiler=-O2,-save-temps=obj"}, ErrUncacheable, `"-save-temps=obj"`},
		{[]string{"--compiler-options", " -ftime-trace"}, ErrUncacheable, `"-ftime-trace"`},
		// Malformed pass-through flags.
		{[]string{"-Xptxas"}, ErrInvalidInput, `-Xptxas`},
		{[]string{"--ptxas-options="}, ErrInvalidInput, `"--ptxas-options="`},
		{[]string{"-Xcompiler", ""}, ErrInvalidInput, `"-Xcompiler"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.extra, " "), func(t *testing.T) {
			// Side outputs are refused even with an ExtraDigest; inputs the
			// key cannot see only without one.
			_, err := MakeKey(withExtra(errors.Is(tc.want, ErrUncacheable), tc.extra...))
			if !errors.Is(err, tc.want) {
				t.Fatalf("MakeKey(%q) error = %v, want %v", tc.extra, err, tc.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.named) {
				t.Errorf("error %q does not name %s", msg, tc.named)
			}
			switch {
			case errors.Is(tc.want, ErrNeedsExtraDigest):
				if !strings.Contains(msg, digestHint) {
					t.Errorf("error %q does not say %q", msg, digestHint)
				}
				// With an ExtraDigest the option is accepted.
				mustKey(t, withExtra(true, tc.extra...))
			case errors.Is(tc.want, ErrUncacheable):
				if !strings.Contains(msg, uncacheHint) {
					t.Errorf("error %q does not say %q", msg, uncacheHint)
				}
			}
		})
	}
}

// TestMakeKeyPassThroughAccepted checks pass-through values that MakeKey
// must not mistake for refused options: ptxas, nvlink and linker values
// are opaque, and -MD in -Xcompiler is MSVC's runtime-library option.
func TestMakeKeyPassThroughAccepted(t *testing.T) {
	for _, extra := range [][]string{
		{"-Xptxas", "-I/x"},
		{"-Xptxas", "-keep"},
		{"-Xnvlink", "-MD"},
		{"-Xlinker", "-M"},
		{"-Xcompiler", "-MD"},
		{"-Xcompiler", "/MD,/O2"},
		{"-Xcompiler", "-fPIC,-Wall", "-Xptxas", "-v,-O3"},
		{"-Xcudafe", "--diag_suppress=177"},
		{"-Xfatbin", "-compress-all"},
	} {
		if _, err := MakeKey(withExtra(false, extra...)); err != nil {
			t.Errorf("MakeKey(%q): %v", extra, err)
		}
	}
}

// BenchmarkMakeKeyOptions measures option canonicalisation: a tiny source
// with a realistic nvcc command line, so hashing does not hide the parsing.
func BenchmarkMakeKeyOptions(b *testing.B) {
	in := baseInput()
	in.Options = Options{Extra: []string{
		"-arch=sm_90", "-std=c++17", "-G", "-lineinfo", "-DN=4", "-DM=2", "--fmad=false",
		"-Xptxas", "-v", "-Xcompiler", "-fPIC", "-I/inc", "-gencode", "arch=compute_90,code=sm_90",
		"--expt-relaxed-constexpr", "-O3",
	}}
	in.ExtraDigest = []byte("headers")
	for b.Loop() {
		if _, err := MakeKey(in); err != nil {
			b.Fatal(err)
		}
	}
}
