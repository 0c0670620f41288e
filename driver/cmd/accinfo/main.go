// Command accinfo opens an accelkit driver and prints each device: its name,
// memory, the driver version and the optional capabilities it offers, in the
// manner of CUDA's deviceQuery.
//
//	go run ./driver/cmd/accinfo                 # auto: CUDA when present, else sim
//	go run ./driver/cmd/accinfo -driver sim -dsn devices=2,capacity=4GiB
//	ACCELKIT_DRIVER=cuda go run ./driver/cmd/accinfo
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/accelkit/accelkit/driver"
	_ "github.com/accelkit/accelkit/driver/cuda"
	_ "github.com/accelkit/accelkit/driver/sim"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: accinfo [-driver NAME] [-dsn KEY=VALUE,...]

Opens an accelkit driver and prints each device: name, memory, driver
version and the optional capabilities (VMM, peer access, host memory
registration) it offers.

flags:
%s
Environment: ACCELKIT_DRIVER=name[:dsn] chooses the backend and its
configuration when -driver is auto (then -dsn may not be given: use
-driver NAME -dsn ... instead); ACCELKIT_LIBCUDA names the libcuda file the
cuda backend loads.

Exit status: 0 on success (and for -h), 1 when the driver cannot be opened
or queried, 2 on a usage error: a bad flag, or a bad ACCELKIT_DRIVER.
`

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("accinfo", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed below
	backends := append([]string{"auto"}, driver.Drivers()...)
	name := fs.String("driver", "auto", "backend: "+strings.Join(backends, ", "))
	dsn := fs.String("dsn", "", "backend configuration, e.g. devices=2,capacity=8GiB for sim")
	printUsage := func(w io.Writer) {
		var flags strings.Builder
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		fmt.Fprintf(w, usage, flags.String())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "accinfo: %v\n\n", err)
		printUsage(stderr)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "accinfo: unexpected argument %q: accinfo takes only flags (-driver, -dsn); run accinfo -h for usage\n", fs.Arg(0))
		return 2
	}
	if !slices.Contains(backends, *name) {
		fmt.Fprintf(stderr, "accinfo: -driver %q: unknown backend; valid: %s\n", *name, strings.Join(backends, ", "))
		return 2
	}
	// Open("auto") takes the backend and its configuration from
	// ACCELKIT_DRIVER when it is set: a mistake there is the same usage
	// error as in the flags, and the message names where it was made.
	dsnFrom := "-dsn"
	if spec := os.Getenv(driver.EnvDriver); *name == "auto" && spec != "" {
		envName, envDSN, err := driver.ParseSpec(spec)
		if err != nil {
			fmt.Fprintf(stderr, "accinfo: %s: %v; valid backends: %s\n", driver.EnvDriver, err, strings.Join(backends, ", "))
			return 2
		}
		if !slices.Contains(backends, envName) {
			fmt.Fprintf(stderr, "accinfo: %s=%q: unknown backend %q; valid: %s, each optionally followed by :dsn (or unset %s, or pass -driver NAME)\n",
				driver.EnvDriver, spec, envName, strings.Join(backends, ", "), driver.EnvDriver)
			return 2
		}
		if *dsn != "" {
			fmt.Fprintf(stderr, "accinfo: -dsn %q with -driver auto while %s=%q is set: the variable's configuration would be used, not -dsn; pass -driver NAME with -dsn, or unset %s\n",
				*dsn, driver.EnvDriver, spec, driver.EnvDriver)
			return 2
		}
		dsnFrom = driver.EnvDriver + "=" + strconv.Quote(spec)
		*dsn = envDSN
	}
	if err := describeAll(stdout, *name, *dsn, dsnFrom); err != nil {
		fmt.Fprintln(stderr, "accinfo:", err)
		var bad badDSN
		if errors.As(err, &bad) || errors.Is(err, driver.ErrUnknownBackend) {
			return 2
		}
		return 1
	}
	return 0
}

// badDSN marks a driver that refused its configuration: a usage error.
// from names where the configuration was given.
type badDSN struct {
	from string
	err  error
}

func (e badDSN) Error() string { return e.from + ": " + e.err.Error() }
func (e badDSN) Unwrap() error { return e.err }

// describeAll opens the backend and prints every device. dsn is the
// configuration in effect, given by dsnFrom.
func describeAll(w io.Writer, name, dsn, dsnFrom string) error {
	drv, err := driver.Open(name, dsn)
	if err != nil {
		// Backends refuse a bad configuration with ErrInvalidValue before
		// they touch a device; an empty one is the backend's defaults.
		if dsn != "" && errors.Is(err, driver.ErrInvalidValue) {
			return badDSN{dsnFrom, err}
		}
		return err
	}
	defer drv.Close()
	fmt.Fprintf(w, "driver %s (%s): %d device(s)\n", drv.Name(), drv.Version(), drv.DeviceCount())
	devs := make([]driver.Device, drv.DeviceCount())
	for i := range devs {
		if devs[i], err = drv.Device(i); err != nil {
			return err
		}
	}
	for _, dev := range devs {
		if err := describe(w, dev, devs); err != nil {
			return fmt.Errorf("device %d: %w", dev.Ordinal(), err)
		}
	}
	return nil
}

const mib = 1 << 20

func describe(w io.Writer, dev driver.Device, all []driver.Device) error {
	free, total, err := dev.MemInfo()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndevice %d: %s\n", dev.Ordinal(), dev.Name())
	fmt.Fprintf(w, "  memory            %d MiB total, %d MiB free\n", total/mib, free/mib)
	if pd, ok := dev.(driver.PropertiesDevice); ok {
		p, err := pd.Properties()
		if err != nil {
			return err
		}
		if p.ComputeCapability != "" {
			fmt.Fprintf(w, "  compute           %s\n", p.ComputeCapability)
		}
		if p.MultiProcessors > 0 {
			fmt.Fprintf(w, "  multiprocessors   %d\n", p.MultiProcessors)
		}
		if p.Simulated {
			fmt.Fprintf(w, "  simulated         yes (figures measured here are not a GPU's)\n")
		}
		keys := make([]string, 0, len(p.Attributes))
		for k := range p.Attributes {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if k == "vmm" || k == "peer" || k == "hostregister" { // printed below, from the capability itself
				continue
			}
			fmt.Fprintf(w, "  %-17s %s\n", k, p.Attributes[k])
		}
	}
	if v, ok := driver.AsVMM(dev); ok {
		fmt.Fprintf(w, "  vmm               yes, granularity %d KiB (expandable segments available)\n", v.Granularity()>>10)
	} else {
		fmt.Fprintf(w, "  vmm               no\n")
	}
	if p, ok := driver.AsPeer(dev); ok {
		var peers []string
		for _, other := range all {
			if other.Ordinal() == dev.Ordinal() {
				continue
			}
			can, err := p.CanAccessPeer(other)
			if err != nil && !errors.Is(err, driver.ErrNotSupported) {
				return err
			}
			if can {
				peers = append(peers, fmt.Sprint(other.Ordinal()))
			}
		}
		if len(peers) == 0 {
			peers = []string{"none"}
		}
		fmt.Fprintf(w, "  peer access       %s\n", strings.Join(peers, ", "))
	}
	if _, ok := driver.AsHostRegister(dev); ok {
		fmt.Fprintf(w, "  host register     yes (existing memory can be pinned in place)\n")
	} else {
		fmt.Fprintf(w, "  host register     no\n")
	}
	return nil
}
