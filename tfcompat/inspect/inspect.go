package inspect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/accelkit/accelkit/tfcompat"
)

// ErrNotSupported is returned on targets where the child cannot load
// plugins (see supported).
var ErrNotSupported = errors.New("inspect: loading plugins is supported on linux and darwin, amd64 and arm64")

// Options say how to inspect and what to judge against. The zero value
// inspects without calling PJRT_Plugin_Initialize and judges no framework
// version.
type Options struct {
	// Framework is the PJRT C API version of the framework that will load
	// the plugin (for jaxlib, the PJRT_API_MAJOR.PJRT_API_MINOR it was
	// built with); nil reports the plugin's version without a verdict.
	Framework *tfcompat.APIVersion
	// Strict judges as XLA does with ENABLE_PJRT_COMPATIBILITY=false
	// (major and minor must be equal); by default compatibility mode
	// (equal majors, plugin minor at least MinCompatMinor).
	Strict bool
	// MinCompatMinor is the framework's kMinPjRtMinor; 0 means
	// tfcompat.PJRTMinCompatMinor.
	MinCompatMinor int
	// TensorFlow is the TensorFlow release a PluggableDevice plugin is
	// judged against (its SP_Platform size); nil means the newest layout
	// tfcompat knows.
	TensorFlow *tfcompat.Version
	// Init calls PJRT_Plugin_Initialize and PJRT_Plugin_Attributes. Off by
	// default: a real plugin may open its device there.
	Init bool
	// Preload are libraries loaded (RTLD_GLOBAL) before the plugin, e.g.
	// TensorFlow's libtensorflow_framework.so.2 for a PluggableDevice plugin
	// that does not link it.
	Preload []string
	// Timeout bounds each child; 0 means DefaultTimeout.
	Timeout time.Duration
	// Exe is the program run as the child; empty means this executable
	// (os.Executable), which must call RunChild first thing.
	Exe string
}

// platformSize is the SP_Platform struct_size the judged TensorFlow
// release declares.
func (o Options) platformSize() int {
	if o.TensorFlow == nil {
		return spPlatformSizeFMG
	}
	f, err := tfcompat.Features(*o.TensorFlow)
	if err != nil || f.ForceMemoryGrowth {
		return spPlatformSizeFMG
	}
	return spPlatformSizeBFC
}

// Inspect loads the shared library at path in a child process and reports
// what it is and whether it fits. The error is for the inspector's own
// failures (no executable to run, a context already done); everything
// about the plugin, its crashes included, is in the Report.
func Inspect(ctx context.Context, path string, opts Options) (Report, error) {
	r := Report{Path: path, Kind: KindUnknown, Verdict: OK}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	st, err := os.Stat(path)
	if err != nil {
		r.add(Fail, "file", "cannot read the plugin: %v", err)
		return r, nil
	}
	if !st.Mode().IsRegular() {
		r.add(Fail, "file", "%s is not a regular file (%s); a plugin is a shared library", path, st.Mode().Type())
		return r, nil
	}
	if !supported {
		return r, ErrNotSupported
	}
	exe := opts.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return r, fmt.Errorf("inspect: finding this executable to run as the child: %w", err)
		}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	req := request{Path: path, Init: opts.Init, Preload: opts.Preload, PlatformSize: opts.platformSize()}
	res, child, err := runChild(ctx, exe, req, timeout)
	if err != nil {
		return r, err
	}
	r.Child = child
	judge(&r, res, opts, timeout)
	return r, nil
}
