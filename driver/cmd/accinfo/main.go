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
	"strings"

	"github.com/accelkit/accelkit/driver"
	_ "github.com/accelkit/accelkit/driver/cuda"
	_ "github.com/accelkit/accelkit/driver/sim"
)

func main() {
	name := flag.String("driver", "auto", "backend: auto, "+strings.Join(driver.Drivers(), ", "))
	dsn := flag.String("dsn", "", "backend configuration, e.g. devices=2,capacity=8GiB for sim")
	flag.Parse()
	if err := run(os.Stdout, *name, *dsn); err != nil {
		fmt.Fprintln(os.Stderr, "accinfo:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, name, dsn string) error {
	drv, err := driver.Open(name, dsn)
	if err != nil {
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
			if k == "vmm" || k == "peer" { // printed below, from the capability itself
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
	return nil
}
