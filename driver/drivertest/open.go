package drivertest

import (
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

// logged keeps OpenDevice's backend line to once per test binary.
var logged sync.Once

// OpenDevice opens device 0 of the backend driver.Open("auto", "") picks
// (ACCELKIT_DRIVER when set, else the registered backend with the highest
// driver.Backend Preference whose probe finds a device: CUDA on a GPU
// machine, else sim; a backend registered without a probe is never picked)
// and closes the driver when tb ends. It logs the backend
// and device once per test binary, since figures hold only for the device
// they were measured on. It fails tb when no backend opens.
//
// OpenDevice registers no backend itself: the caller imports the ones it
// wants measured, typically
//
//	import (
//		_ "github.com/accelkit/accelkit/driver/cuda" // measured when a GPU is there
//		_ "github.com/accelkit/accelkit/driver/sim"
//	)
//
// so that one `go test -c` binary measures sim here and CUDA on a GPU
// machine.
func OpenDevice(tb testing.TB) driver.Device {
	tb.Helper()
	drv, err := driver.Open("auto", "")
	if err != nil {
		tb.Fatalf("drivertest: open the default backend: %v", err)
	}
	tb.Cleanup(func() { drv.Close() })
	dev, err := drv.Device(0)
	if err != nil {
		tb.Fatalf("drivertest: device 0 of backend %s: %v", drv.Name(), err)
	}
	logged.Do(func() { tb.Logf("backend %s (%s), device %q", drv.Name(), drv.Version(), dev.Name()) })
	return dev
}
