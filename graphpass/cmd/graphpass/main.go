// Command graphpass runs accelkit's graph passes over a TensorFlow GraphDef
// (.pb) file and writes the result, keeping every byte the passes do not
// change.
//
//	graphpass -in model.pb -out model.pinned.pb [-pass pin-host-compute] [-report]
//	graphpass -in model.pb -dump
//
// -pass lists the passes to run, comma-separated (default: all). -report
// prints each pass's counts and every node it moved. -dump prints the nodes
// as text and writes nothing. ACCELKIT_DISABLE_HOST_COMPUTE_PIN=1 turns the
// pin-host-compute pass off.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/accelkit/accelkit/graphpass"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("graphpass", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "input GraphDef (.pb)")
	out := fs.String("out", "", "output GraphDef (.pb); required unless -dump")
	passes := fs.String("pass", "", "comma-separated passes to run (default: all)")
	report := fs.Bool("report", false, "print per-pass counts and moved nodes")
	dump := fs.Bool("dump", false, "print the input's nodes as text and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := do(*in, *out, *passes, *report, *dump, stdout); err != nil {
		fmt.Fprintln(stderr, "graphpass:", err)
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

func do(in, out, passes string, report, dump bool, stdout io.Writer) error {
	if in == "" {
		return usageError{"-in is required"}
	}
	if !dump && out == "" {
		return usageError{"-out is required unless -dump is given"}
	}
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	g, err := graphpass.Decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if dump {
		return g.Dump(stdout)
	}
	m := graphpass.NewManager(graphpass.NewPinHostCompute(graphpass.PinOptions{}))
	if passes != "" {
		for _, name := range m.Names() {
			_ = m.Enable(name, false)
		}
		for _, name := range strings.Split(passes, ",") {
			if err := m.Enable(strings.TrimSpace(name), true); err != nil {
				return usageError{err.Error()}
			}
		}
	}
	r, err := m.Run(g)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, g.Encode(), 0o644); err != nil {
		return err
	}
	if report {
		fmt.Fprint(stdout, r.String())
	}
	return nil
}
