//go:build linux && cgo

package nvrtc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/nvrtc"
)

func TestOpenMissingLibrary(t *testing.T) {
	missing := t.TempDir() + "/libnvrtc.so.13"
	_, err := nvrtc.Open(missing)
	if !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), nvrtc.EnvLibrary) || !strings.Contains(err.Error(), "install") {
		t.Errorf("Open(missing) = %v; want ErrNotSupported naming the file, what to install and %s", err, nvrtc.EnvLibrary)
	}
	t.Setenv(nvrtc.EnvLibrary, missing)
	_, err = nvrtc.Open("")
	if !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "from "+nvrtc.EnvLibrary) {
		t.Errorf("Open with %s missing = %v; want ErrNotSupported saying the variable named it", nvrtc.EnvLibrary, err)
	}
}
