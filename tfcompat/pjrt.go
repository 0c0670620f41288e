package tfcompat

// PJRT C API facts.
//
// A PJRT plugin reports its PJRT_Api_Version {major_version, minor_version};
// the framework compares it with the PJRT_API_MAJOR/PJRT_API_MINOR it was
// built with (xla/pjrt/pjrt_api.cc, InitializePjrtPlugin). By default the
// versions must match exactly; in compatibility mode (the
// ENABLE_PJRT_COMPATIBILITY environment variable, on unless set false in the
// revision read) the majors must match and the plugin's minor must be at
// least kMinPjRtMinor, the start of XLA's forward-compatibility window.
//
// JAX reads PJRT_NAMES_AND_LIBRARY_PATHS as "name1:path1,name2:path2"
// ("name1;path1,name2;path2" on Windows: it splits each entry on
// os.path.pathsep), and treats a path ending in ".json" as a plugin config
// file with a "library_path" field. JAX logs and skips a malformed entry and
// lets a later duplicate name win; ParsePluginPaths rejects both.

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// PJRTMinCompatMinor is kMinPjRtMinor in xla/pjrt/pjrt_api.cc at the
// revision read (XLA as vendored in tensorflow/tensorflow commit
// 0704c4c03f96); XLA raises it as its compatibility window moves, so callers
// that know their framework's value should use CheckPJRTMin.
const PJRTMinCompatMinor = 29

// ErrPJRTVersion is returned (wrapped) by CheckPJRT.
var ErrPJRTVersion = errors.New("tfcompat: incompatible pjrt c api version")

// ErrPluginPaths is returned (wrapped, in a *PluginPathError) by
// ParsePluginPaths.
var ErrPluginPaths = errors.New("tfcompat: invalid PJRT_NAMES_AND_LIBRARY_PATHS")

// APIVersion is a PJRT C API version.
type APIVersion struct{ Major, Minor int }

func (v APIVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// CheckPJRT applies XLA's rule with PJRTMinCompatMinor as the minimum
// plugin minor in compatibility mode.
func CheckPJRT(framework, plugin APIVersion, compatMode bool) error {
	return CheckPJRTMin(framework, plugin, compatMode, PJRTMinCompatMinor)
}

// CheckPJRTMin applies XLA's rule: without compatibility mode the plugin's
// major and minor must equal the framework's; with it the majors must be
// equal and the plugin's minor at least minMinor. Errors wrap
// ErrPJRTVersion and give both versions and the rule applied.
func CheckPJRTMin(framework, plugin APIVersion, compatMode bool, minMinor int) error {
	if compatMode {
		if plugin.Major != framework.Major {
			return fmt.Errorf("%w: plugin %s, framework %s: compatibility mode requires equal major versions",
				ErrPJRTVersion, plugin, framework)
		}
		if plugin.Minor < minMinor {
			return fmt.Errorf("%w: plugin %s, framework %s: compatibility mode requires plugin minor >= %d",
				ErrPJRTVersion, plugin, framework, minMinor)
		}
		return nil
	}
	if plugin != framework {
		return fmt.Errorf("%w: plugin %s, framework %s: without compatibility mode major and minor must be equal",
			ErrPJRTVersion, plugin, framework)
	}
	return nil
}

// Plugin is one entry of PJRT_NAMES_AND_LIBRARY_PATHS.
type Plugin struct {
	Name string
	Path string
	// Config is true when Path ends in ".json": JAX reads such a file as a
	// plugin config (a "library_path" field and optional options) rather
	// than loading it as a library.
	Config bool
}

// PluginPathError describes a malformed entry of PJRT_NAMES_AND_LIBRARY_PATHS.
type PluginPathError struct {
	Pos    int    // 1-based position of the entry in the list
	Entry  string // the entry as written
	Reason string
	Sep    string // the name/path separator expected
}

func (e *PluginPathError) Error() string {
	return fmt.Sprintf("%v: entry %d %q: %s; expected name%spath entries separated by commas, e.g. cuda%s/opt/pjrt/libcuda_plugin.so",
		ErrPluginPaths, e.Pos, e.Entry, e.Reason, e.Sep, e.Sep)
}

func (e *PluginPathError) Unwrap() error { return ErrPluginPaths }

// ParsePluginPaths parses a PJRT_NAMES_AND_LIBRARY_PATHS value with the
// separator of the running system (';' on Windows, ':' elsewhere).
func ParsePluginPaths(s string) ([]Plugin, error) {
	return ParsePluginPathsFor(s, runtime.GOOS)
}

// ParsePluginPathsFor parses s as it would be parsed on goos. An empty s
// yields no plugins. An entry without exactly one separator, with an empty
// name or path, or repeating an earlier name is an error naming the entry
// and its position.
func ParsePluginPathsFor(s, goos string) ([]Plugin, error) {
	if s == "" {
		return nil, nil
	}
	sep := ":"
	if goos == "windows" {
		sep = ";"
	}
	var out []Plugin
	seen := make(map[string]int)
	for i, entry := range strings.Split(s, ",") {
		pos := i + 1
		fail := func(reason string) ([]Plugin, error) {
			return nil, &PluginPathError{Pos: pos, Entry: entry, Reason: reason, Sep: sep}
		}
		switch n := strings.Count(entry, sep); {
		case entry == "":
			return fail("empty entry")
		case n == 0:
			return fail("missing separator " + sep)
		case n > 1:
			return fail("more than one separator " + sep + " (JAX splits on every one)")
		}
		name, path, _ := strings.Cut(entry, sep)
		if name == "" {
			return fail("empty name")
		}
		if path == "" {
			return fail("empty path")
		}
		if first, dup := seen[name]; dup {
			return fail(fmt.Sprintf("duplicate name %q (first at entry %d)", name, first))
		}
		seen[name] = pos
		out = append(out, Plugin{Name: name, Path: path, Config: strings.HasSuffix(path, ".json")})
	}
	return out, nil
}
