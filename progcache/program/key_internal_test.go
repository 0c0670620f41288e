package program

import (
	"errors"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/progcache"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   progcache.Options
		want []string
	}{
		{"zero", progcache.Options{Arch: "sm_90"}, nil},
		{"every field", progcache.Options{
			Arch: "sm_90", Std: "c++17",
			Defines:      []progcache.Define{{Name: "N", Value: "4"}, {Name: "X", Undef: true}, {Name: "F(a)", Value: "a+1"}},
			IncludePaths: []string{"/inc"}, PreIncludes: []string{"pre.h"},
			Debug: true, LineInfo: true, FastMath: true, Relocatable: true, MaxRegisters: 32,
			Extra: []string{"-Xptxas", "-v"},
		}, []string{
			"--std=c++17", "--define-macro=N=4", "--undefine-macro=X", "--define-macro=F(a)=a+1",
			"--include-path=/inc", "--pre-include=pre.h",
			"--device-debug", "--generate-line-info", "--use_fast_math", "--relocatable-device-code=true", "--maxrregcount=32",
			"-Xptxas", "-v",
		}},
	} {
		got, err := flags(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: flags = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	for _, extra := range [][]string{{"-arch", "sm_80"}, {"-arch=sm_80"}, {"--gpu-architecture=compute_80"}} {
		if _, err := flags(progcache.Options{Extra: extra}); !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "Options.Arch") {
			t.Errorf("flags with Extra %q = %v, want an error naming Options.Arch", extra, err)
		}
	}
}

func TestVersionFrom(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"a release dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v0.1.0"}}, Settings: vcs}, "v0.1.0"},
		{"replaced by a directory (go.work)", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v0.1.0", Replace: &debug.Module{Path: "../program"}}}, Settings: vcs},
			"(devel) vcs.revision=abc123 vcs.modified=true"},
		{"the main module, stamped", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: vcs},
			"(devel) vcs.revision=abc123 vcs.modified=true"},
		{"the main module, a test binary", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "(devel)"},
	} {
		if got := versionFrom(&tc.bi); got != tc.want {
			t.Errorf("%s: versionFrom = %q, want %q", tc.name, got, tc.want)
		}
	}
	if v := ModuleVersion(); !strings.HasPrefix(v, "(devel)") {
		t.Errorf("ModuleVersion in this module's tests = %q, want (devel)...", v)
	}
}

func TestTargetOf(t *testing.T) {
	for arch, want := range map[string]string{"sm_90": "cubin", "sm_90a": "cubin", "compute_75": "ptx"} {
		if got, err := targetOf(arch); err != nil || got != want {
			t.Errorf("targetOf(%q) = %q, %v; want %q", arch, got, err, want)
		}
	}
	if _, err := targetOf("gfx90a"); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("targetOf(gfx90a) = %v, want ErrInvalidValue", err)
	}
}
