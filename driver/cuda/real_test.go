package cuda

import (
	"errors"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// openReal opens the real CUDA driver (libcuda.so.1, or ACCELKIT_LIBCUDA)
// or skips tb when there is none: no library, no device, or a build
// without cgo.
func openReal(tb testing.TB) driver.Driver {
	tb.Helper()
	drv, err := Open("")
	switch {
	case errors.Is(err, driver.ErrNoDevice) || errors.Is(err, driver.ErrNotSupported):
		tb.Skipf("no CUDA device: %v", err)
	case err != nil:
		tb.Fatalf("Open(cuda): %v", err)
	case drv.DeviceCount() == 0:
		drv.Close()
		tb.Skip("CUDA driver without devices")
	}
	return drv
}

// TestRealConformance runs the conformance suite on the real driver, where
// one is installed with a device; it skips elsewhere.
func TestRealConformance(t *testing.T) {
	openReal(t).Close()
	drivertest.Run(t, func(t *testing.T) driver.Driver { return openReal(t) })
}

// TestRealProperties logs what the real devices report.
func TestRealProperties(t *testing.T) {
	drv := openReal(t)
	defer drv.Close()
	t.Logf("%s, %d devices", drv.Version(), drv.DeviceCount())
	for i := range drv.DeviceCount() {
		d, err := drv.Device(i)
		if err != nil {
			t.Fatal(err)
		}
		p, err := d.(driver.PropertiesDevice).Properties()
		if err != nil {
			t.Fatal(err)
		}
		free, total, err := d.MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		_, vmm := driver.AsVMM(d)
		_, peer := driver.AsPeer(d)
		t.Logf("device %d: %s, cc %s, %d SMs, %d/%d bytes free, vmm %v, peer %v, %v",
			i, p.Name, p.ComputeCapability, p.MultiProcessors, free, total, vmm, peer, p.Attributes)
		if p.TotalMemory == 0 || p.Name == "" {
			t.Errorf("device %d: Properties %+v", i, p)
		}
	}
}
