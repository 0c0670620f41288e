package bench

import (
	"errors"
	"fmt"
	"testing"

	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/hostpin"
	"github.com/accelkit/accelkit/progcache"
)

// The Close convention: one errors.Is(err, driver.ErrClosed) serves every
// module, whether it wraps driver.ErrClosed (devalloc, hostpin) or stands
// without the driver module and matches it by its AccelkitClosed mark
// (progcache). bench is the one module above them all, so the check lives
// here.
func TestErrClosedMatchesDriver(t *testing.T) {
	for name, err := range map[string]error{
		"devalloc":  devalloc.ErrClosed,
		"hostpin":   hostpin.ErrClosed,
		"progcache": progcache.ErrClosed,
	} {
		wrapped := fmt.Errorf("op: %w", err)
		if !errors.Is(wrapped, driver.ErrClosed) {
			t.Errorf("%s.ErrClosed (wrapped) does not match driver.ErrClosed", name)
		}
		if !errors.Is(wrapped, err) {
			t.Errorf("%s.ErrClosed (wrapped) does not match itself", name)
		}
		if errors.Is(driver.ErrClosed, err) {
			t.Errorf("driver.ErrClosed matches %s.ErrClosed: the match must go one way", name)
		}
	}
	if errors.Is(progcache.ErrClosed, progcache.ErrCorrupt) || errors.Is(progcache.ErrClosed, errors.New("closed")) {
		t.Error("progcache.ErrClosed matches an unrelated error")
	}
}
