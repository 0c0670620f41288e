package drivertest

import (
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/sim"
)

// logged holds the backends OpenDevice has logged, one line per backend
// per test binary.
var logged sync.Map

// OpenDriver opens the backend registered under name with dsn, as
// driver.Open does, and closes it when tb ends. It fails tb when the
// backend does not open.
func OpenDriver(tb testing.TB, name, dsn string) driver.Driver {
	tb.Helper()
	drv, err := driver.Open(name, dsn)
	if err != nil {
		tb.Fatalf("drivertest: driver.Open(%q, %q): %v", name, dsn, err)
	}
	tb.Cleanup(func() { drv.Close() })
	return drv
}

// OpenDevice opens device 0 of the backend driver.Open(name, dsn) opens,
// closes the driver when tb ends, and returns the device with the sim's
// test hooks (gates, fault injection, Stats) when it is a sim device, else
// nil. It fails tb when the backend does not open or has no device, and
// logs the backend and device once per backend per test binary, since
// figures hold only for the device they were measured on.
//
// A unit test that needs the hooks names the simulator with its
// configuration, OpenDevice(t, "sim", "capacity=64MiB"); a benchmark
// names "auto" with an empty dsn, so that ACCELKIT_DRIVER when set, else
// the registered backend with the highest driver.Backend Preference whose
// probe finds a device, is measured: CUDA on a GPU machine, else sim. It
// registers sim (this package imports it); other backends join by the
// caller's import, typically
//
//	import _ "github.com/accelkit/accelkit/driver/cuda" // measured when a GPU is there
//
// so that one `go test -c` binary measures sim here and CUDA on a GPU
// machine.
func OpenDevice(tb testing.TB, name, dsn string) (driver.Device, *sim.Device) {
	tb.Helper()
	drv := OpenDriver(tb, name, dsn)
	dev, err := drv.Device(0)
	if err != nil {
		tb.Fatalf("drivertest: device 0 of backend %s: %v", drv.Name(), err)
	}
	if _, seen := logged.LoadOrStore(drv.Name(), true); !seen {
		tb.Logf("backend %s (%s), device %q", drv.Name(), drv.Version(), dev.Name())
	}
	return dev, sim.Hooks(dev)
}
