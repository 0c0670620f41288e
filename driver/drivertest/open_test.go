package drivertest_test

import (
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
)

// TestOpenDevice checks that OpenDevice hands the dsn to the backend it
// names, returns the sim's hooks for a sim device, and closes the driver
// at the end of the test.
func TestOpenDevice(t *testing.T) {
	var dev driver.Device
	t.Run("sim", func(t *testing.T) {
		var h *sim.Device
		dev, h = drivertest.OpenDevice(t, "sim", "capacity=3MiB")
		if h == nil || h != sim.Hooks(dev) {
			t.Fatalf("hooks %p; want the sim device behind %T", h, dev)
		}
		if _, total, err := dev.MemInfo(); err != nil || total != 3<<20 {
			t.Errorf("MemInfo total = %d, %v; want the dsn's 3 MiB", total, err)
		}
	})
	if _, err := dev.Malloc(1); err == nil {
		t.Error("Malloc after the test that opened the device ended succeeded; want the driver closed")
	}

	drv := drivertest.OpenDriver(t, "sim", "devices=2")
	if n := drv.DeviceCount(); n != 2 {
		t.Errorf("OpenDriver(sim, devices=2): %d devices", n)
	}
}
