// Command graphpass runs accelkit's graph passes over a TensorFlow GraphDef
// (.pb) file and writes the result, keeping every byte the passes do not
// change.
//
//	graphpass -in model.pb -out model.pinned.pb [-pass pin-host-compute] [-report] [-max-bytes n]
//	graphpass -in model.pb -dump
//
// -pass lists the passes to run, comma-separated (default: all). -report
// prints each pass's counts and every node it moved. -dump prints the nodes
// as text and writes nothing. ACCELKIT_DISABLE_HOST_COMPUTE_PIN=1 turns the
// pin-host-compute pass off. -h prints the usage, with the limits on input
// and the rules for output, which the usage constant below states.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/accelkit/accelkit/graphpass"
)

const usage = `usage: graphpass -in model.pb -out model.pinned.pb [-pass names] [-report] [-max-bytes n]
       graphpass -in model.pb -dump [-max-bytes n]

Runs accelkit's graph passes over a TensorFlow GraphDef and writes the
result, keeping every byte the passes do not change.

Flags:
%s
Input: -in must be a regular file, or a symbolic link to one, of at most
-max-bytes bytes (default %d, protobuf's 2 GiB limit);
devices, FIFOs and directories are refused. Decoding allocates one copy of
the input plus at most %d bytes per input byte (model-shaped graphs need
about 4); an input that would need more, such as millions of empty
NodeDefs, attrs or inputs, is refused.

Output: -out is replaced atomically. The graph is written to a temporary
file in -out's directory, synced, and renamed over -out, so after any
error -out is as it was and no temporary file is left (a crash or kill
while writing can leave one, named .NAME followed by digits); -in and -out
may be the same file. Writing needs permission to create files in that
directory. An existing -out keeps its permission bits; a new one gets 0644
less the umask. The result is a new file: it belongs to the user running
graphpass, and other hard links to the old file keep the old contents.
-out must be a regular file or not exist yet: a symbolic link is refused,
neither replaced nor written through (give the path it points to), and so
are directories, devices and FIFOs.

Environment: ACCELKIT_DISABLE_HOST_COMPUTE_PIN=1 turns pin-host-compute off.

Exit status: 0 on success (and for -h), 1 on an error, 2 on a usage error.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	return cli{stdout: stdout, stderr: stderr}.run(args)
}

// cli is one run of the command.
type cli struct {
	stdout, stderr io.Writer
	// wrapOutput, when set, wraps the writer of the output's temporary
	// file: tests inject write failures through it.
	wrapOutput func(io.Writer) io.Writer
}

// options are the parsed flags.
type options struct {
	in, out, passes string
	report, dump    bool
	maxBytes        int
}

func (c cli) run(args []string) int {
	fs := flag.NewFlagSet("graphpass", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // printed below: the usage to stdout for -h, errors and usage to stderr
	var o options
	fs.StringVar(&o.in, "in", "", "input GraphDef (.pb): a regular file")
	fs.StringVar(&o.out, "out", "", "output GraphDef (.pb), replaced atomically; required unless -dump")
	fs.StringVar(&o.passes, "pass", "", "comma-separated passes to run (default: all)")
	fs.BoolVar(&o.report, "report", false, "print per-pass counts and moved nodes")
	fs.BoolVar(&o.dump, "dump", false, "print the input's nodes as text and exit")
	fs.IntVar(&o.maxBytes, "max-bytes", graphpass.DefaultLimits.MaxBytes, "largest input accepted, in bytes")
	printUsage := func(w io.Writer) {
		var flags strings.Builder
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		lim := graphpass.DefaultLimits
		fmt.Fprintf(w, usage, flags.String(), lim.MaxBytes, lim.MaxAllocPerByte)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(c.stdout)
			return 0
		}
		fmt.Fprintf(c.stderr, "graphpass: %v\n\n", err)
		printUsage(c.stderr)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "graphpass: unexpected argument %q: name the input with -in and the output with -out; run graphpass -h for usage\n", fs.Arg(0))
		return 2
	}
	if err := c.do(o); err != nil {
		fmt.Fprintln(c.stderr, "graphpass:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func (c cli) do(o options) error {
	if o.in == "" {
		return usageError{"-in is required"}
	}
	if !o.dump && o.out == "" {
		return usageError{"-out is required unless -dump is given"}
	}
	if o.maxBytes < 1 || o.maxBytes > math.MaxInt32 {
		return usageError{fmt.Sprintf("-max-bytes %d: want 1 to %d", o.maxBytes, math.MaxInt32)}
	}
	// Check every flag before reading the input, so that a usage error is
	// reported as one whatever the input holds.
	pin, err := graphpass.NewPinHostCompute(graphpass.PinOptions{})
	if err != nil {
		return err
	}
	m := graphpass.NewManager(pin)
	if o.passes != "" {
		for _, name := range m.Names() {
			_ = m.Enable(name, false)
		}
		for _, name := range strings.Split(o.passes, ",") {
			if err := m.Enable(strings.TrimSpace(name), true); err != nil {
				return usageError{"-pass: " + bare(err)}
			}
		}
	}
	if !o.dump {
		// Refuse an unusable -out before the work, not after it.
		if err := checkOutput(o.out); err != nil {
			return pathError("-out", o.out, err)
		}
		dir := filepath.Dir(o.out)
		switch fi, err := os.Stat(dir); {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("-out %s: its directory %s does not exist; create it first", o.out, dir)
		case err != nil:
			return fmt.Errorf("-out %s: %w", o.out, err)
		case !fi.IsDir():
			return fmt.Errorf("-out %s: %s is not a directory", o.out, dir)
		}
	}
	data, err := readInput(o.in, o.maxBytes)
	if err != nil {
		return pathError("-in", o.in, err)
	}
	g, err := graphpass.DecodeLimits(data, graphpass.Limits{MaxBytes: o.maxBytes})
	if err != nil {
		if errors.Is(err, graphpass.ErrMalformed) {
			return fmt.Errorf("-in %s: %s; want a binary GraphDef, as tf.io.write_graph(..., as_text=False) writes", o.in, bare(err))
		}
		return fmt.Errorf("-in %s: %s", o.in, bare(err))
	}
	if o.dump {
		return g.Dump(c.stdout)
	}
	r, err := m.Run(g)
	if err != nil {
		return err
	}
	if err := writeOutput(o.out, g.Encode(), c.wrapOutput); err != nil {
		return err
	}
	if o.report {
		fmt.Fprint(c.stdout, r.String())
	}
	return nil
}

// bare is err's message without the "graphpass: " that the library's
// errors start with and the command prints already.
func bare(err error) string { return strings.TrimPrefix(err.Error(), "graphpass: ") }

// pathError names the flag of a file the OS refused ("-in x: no such file
// or directory" rather than "stat x: no such file or directory"); errors
// that name their flag already pass unchanged.
func pathError(flag, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return fmt.Errorf("%s %s: %w", flag, path, pe.Err)
	}
	return err
}
