// Command plugincheck loads PJRT and TensorFlow PluggableDevice plugins,
// each in a child process, and says whether they fit the framework that
// will load them.
//
// Usage:
//
//	plugincheck [flags] [plugin.so | config.json ...]
//
// With no arguments it inspects every plugin PJRT_NAMES_AND_LIBRARY_PATHS
// names. It prints one block per plugin (or, with -json, a JSON array) and
// exits 1 when any plugin fails, 2 on a usage error, else 0.
//
// Flags:
//
//	-framework MAJOR.MINOR  PJRT C API version of the framework (e.g. jaxlib's)
//	-strict                 judge as ENABLE_PJRT_COMPATIBILITY=false does
//	-min-minor N            the framework's minimum plugin minor in compatibility mode
//	-tf VERSION             TensorFlow release a PluggableDevice plugin is judged against
//	-init                   call PJRT_Plugin_Initialize and PJRT_Plugin_Attributes
//	-preload LIB            load LIB first (repeatable), e.g. libtensorflow_framework.so.2
//	-timeout DURATION       time limit per plugin (default 30s)
//	-json                   JSON output
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/accelkit/accelkit/tfcompat"
	"github.com/accelkit/accelkit/tfcompat/inspect"
)

func main() {
	inspect.RunChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Getenv("PJRT_NAMES_AND_LIBRARY_PATHS"), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func run(ctx context.Context, args []string, env string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugincheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts      inspect.Options
		framework = fs.String("framework", "", "PJRT C API `MAJOR.MINOR` of the framework that loads the plugin (e.g. jaxlib's)")
		tf        = fs.String("tf", "", "TensorFlow `VERSION` a PluggableDevice plugin is judged against")
		asJSON    = fs.Bool("json", false, "print JSON")
		preload   listFlag
	)
	fs.BoolVar(&opts.Strict, "strict", false, "judge as ENABLE_PJRT_COMPATIBILITY=false: major and minor must be equal")
	fs.IntVar(&opts.MinCompatMinor, "min-minor", tfcompat.PJRTMinCompatMinor, "the framework's minimum plugin minor in compatibility mode")
	fs.BoolVar(&opts.Init, "init", false, "call PJRT_Plugin_Initialize and PJRT_Plugin_Attributes (a real plugin may touch its device)")
	fs.Var(&preload, "preload", "load `LIB` before the plugin (repeatable)")
	fs.DurationVar(&opts.Timeout, "timeout", inspect.DefaultTimeout, "time limit per plugin")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: plugincheck [flags] [plugin.so | config.json ...]\nWithout arguments, the plugins PJRT_NAMES_AND_LIBRARY_PATHS names.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	opts.Preload = preload
	if *framework != "" {
		v, err := parseAPIVersion(*framework)
		if err != nil {
			fmt.Fprintf(stderr, "plugincheck: -framework: %v\n", err)
			return 2
		}
		opts.Framework = &v
	}
	if *tf != "" {
		v, err := tfcompat.ParseVersion(*tf)
		if err != nil {
			fmt.Fprintf(stderr, "plugincheck: -tf: %v\n", err)
			return 2
		}
		opts.TensorFlow = &v
	}
	var reports []inspect.Report
	if fs.NArg() == 0 {
		if env == "" {
			fmt.Fprintln(stderr, "plugincheck: no plugin given and PJRT_NAMES_AND_LIBRARY_PATHS is empty")
			fs.Usage()
			return 2
		}
		rs, err := inspect.InspectPlugins(ctx, env, opts)
		if err != nil {
			fmt.Fprintf(stderr, "plugincheck: PJRT_NAMES_AND_LIBRARY_PATHS: %v\n", err)
			return 2
		}
		reports = rs
	}
	for _, p := range fs.Args() {
		r, err := inspect.InspectPath(ctx, p, opts)
		if err != nil {
			fmt.Fprintf(stderr, "plugincheck: %s: %v\n", p, err)
			return 2
		}
		reports = append(reports, r)
	}
	write := inspect.WriteText
	if *asJSON {
		write = inspect.WriteJSON
	}
	if err := write(stdout, reports); err != nil {
		fmt.Fprintf(stderr, "plugincheck: %v\n", err)
		return 2
	}
	if inspect.Worst(reports) == inspect.Fail {
		return 1
	}
	return 0
}

// parseAPIVersion parses "MAJOR.MINOR".
func parseAPIVersion(s string) (tfcompat.APIVersion, error) {
	maj, min, ok := strings.Cut(s, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if !ok || err1 != nil || err2 != nil || a < 0 || b < 0 {
		return tfcompat.APIVersion{}, errors.New("want MAJOR.MINOR, e.g. 0.54, got " + strconv.Quote(s))
	}
	return tfcompat.APIVersion{Major: a, Minor: b}, nil
}
