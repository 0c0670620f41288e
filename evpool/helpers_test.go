package evpool_test

import (
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/sim"
)

// openSim opens a small simulated driver for one test.
func openSim(t testing.TB, devices int) *sim.Driver {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.Devices = devices
	cfg.Capacity = 64 << 20
	drv, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

// simDevice returns device i of drv and its test hooks.
func simDevice(t testing.TB, drv *sim.Driver, i int) (driver.Device, *sim.Device) {
	t.Helper()
	dev, err := drv.Device(i)
	if err != nil {
		t.Fatal(err)
	}
	h := sim.Hooks(dev)
	if h == nil {
		t.Fatalf("device %d of the sim driver has no hooks", i)
	}
	return dev, h
}

// newStreams makes n streams on dev, destroyed at cleanup.
func newStreams(t testing.TB, dev driver.Device, n int) []driver.Stream {
	t.Helper()
	ss := make([]driver.Stream, n)
	for i := range ss {
		s, err := dev.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		ss[i] = s
		t.Cleanup(func() { s.Destroy() })
	}
	return ss
}

// gate holds s until the returned function is called (at cleanup at the
// latest, so a failing test never leaves a stream goroutine blocked).
func gate(t testing.TB, h *sim.Device, s driver.Stream) func() {
	t.Helper()
	open, err := h.Gate(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(open)
	return open
}

// syncAll waits for every stream; errors are the tests' to check elsewhere.
func syncAll(ss ...driver.Stream) {
	for _, s := range ss {
		s.Synchronize()
	}
}
