//go:build !(linux && cgo)

package nvrtc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/nvrtc"
)

func TestOpenWithoutCgo(t *testing.T) {
	c, err := nvrtc.Open("")
	if c != nil || !errors.Is(err, driver.ErrNotSupported) || !strings.Contains(err.Error(), "built without cgo") {
		t.Errorf("Open = %v, %v; want ErrNotSupported saying built without cgo", c, err)
	}
}
