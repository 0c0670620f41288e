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
// with only cuda registered, the error names cuda's probe and its reason.
func TestAutoWithoutCgo(t *testing.T) {
	t.Setenv(driver.EnvDriver, "")
	drv, err := driver.Open("auto", "")
	if drv != nil || !errors.Is(err, driver.ErrNoDevice) || !errors.Is(err, driver.ErrNotSupported) ||
		!strings.Contains(err.Error(), "cuda: probe: ") || !strings.Contains(err.Error(), "built without cgo") {
		t.Errorf("Open(auto) = %v, %v; want ErrNoDevice naming cuda's probe: built without cgo", drv, err)
	}
}
