package drivertest_test

import (
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
	"github.com/accelkit/accelkit/driver/sim"
)

// A backend's test file runs the suite with an opener for a fresh driver;
// Run closes it after each subtest.
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		drivertest.Run(t, func(t *testing.T) driver.Driver {
			drv, err := sim.Open("devices=2")
			if err != nil {
				t.Fatal(err)
			}
			return drv
		})
	}
}
