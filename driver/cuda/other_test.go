//go:build !(linux && cgo)

package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

func TestOpenWithoutCgo(t *testing.T) {
	for _, open := range []func() (driver.Driver, error){
		func() (driver.Driver, error) { return Open("") },
		func() (driver.Driver, error) { return driver.Open("cuda", "") },
	} {
		drv, err := open()
		if drv != nil || !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "built without cgo") {
			t.Errorf("Open = %v, %v; want ErrNotSupported saying the backend was built without cgo", drv, err)
		}
	}
}

// TestAutoWithoutCgo checks that auto passes over cuda here and says why:
// cuda's probe names its reason, and auto opens sim, which is registered
// too (drivertest imports it), as in a program that imports both.
func TestAutoWithoutCgo(t *testing.T) {
	t.Setenv(driver.EnvDriver, "")
	if err := probe(""); !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "built without cgo") {
		t.Errorf("probe = %v; want ErrNotSupported saying built without cgo", err)
	}
	drv, err := driver.Open("auto", "")
	if err != nil {
		t.Fatalf("Open(auto) = %v; want sim, past cuda", err)
	}
	defer drv.Close()
	if drv.Name() != "sim" {
		t.Errorf("Open(auto) opened %s; want sim, past cuda", drv.Name())
	}
}

func TestRawLaunchLoopWithoutCgo(t *testing.T) {
	cfg := driver.LaunchConfig{Grid: driver.Dim3{X: 1}, Block: driver.Dim3{X: 1}}
	if err := RawLaunchLoop(nil, nil, cfg, nil, 1); !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "built without cgo") {
		t.Errorf("RawLaunchLoop = %v; want ErrNotSupported saying the backend was built without cgo", err)
	}
}
