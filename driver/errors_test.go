package driver

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestSentinelsNameThePackage checks that each sentinel's text begins
// with "driver: ", as every accelkit module's errors name their module,
// and that ErrClosed keeps its AccelkitClosed mark and == identity.
func TestSentinelsNameThePackage(t *testing.T) {
	for _, err := range []error{
		ErrOutOfMemory, ErrInvalidValue, ErrInvalidPointer, ErrNotPinned,
		ErrNotSupported, ErrNoDevice, ErrClosed, ErrAlreadyRegistered,
		ErrNotRegistered, ErrDeviceLost, ErrUnknownBackend,
	} {
		if msg := err.Error(); !strings.HasPrefix(msg, "driver: ") || strings.Count(msg, "driver:") != 1 {
			t.Errorf("sentinel %q: want one \"driver: \" prefix", msg)
		}
	}
	if _, ok := ErrClosed.(interface{ AccelkitClosed() }); !ok {
		t.Error("ErrClosed lost its AccelkitClosed method")
	}
	if !errors.Is(fmt.Errorf("sim: Malloc: %w", ErrClosed), ErrClosed) {
		t.Error("a wrapped ErrClosed does not match it")
	}
}

// TestDriverMessagesSayDriverOnce checks that the registry's own errors,
// which wrap a sentinel, do not repeat the package prefix (backendkit's
// tests check ClosedError's).
func TestDriverMessagesSayDriverOnce(t *testing.T) {
	for _, err := range []error{
		unknownBackend("tpu", ""),
		unknownBackend("tpu", ` in ACCELKIT_DRIVER="tpu"`),
	} {
		if msg := err.Error(); strings.Count(msg, "driver:") != 1 {
			t.Errorf("%q: want \"driver:\" exactly once", msg)
		}
	}
}
