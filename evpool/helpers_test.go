package evpool_test

import (
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/sim"
)

// simDSN configures the sim the tests open, with drivertest.OpenDevice or
// OpenDriver: small, so a leak shows.
const simDSN = "capacity=64MiB"

// deviceOf returns device i of drv.
func deviceOf(t testing.TB, drv driver.Driver, i int) driver.Device {
	t.Helper()
	dev, err := drv.Device(i)
	if err != nil {
		t.Fatal(err)
	}
	return dev
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
