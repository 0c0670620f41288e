package driver

import (
	"errors"
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
	if !errors.Is(ClosedError("sim", "Malloc"), ErrClosed) {
		t.Error("ClosedError does not match ErrClosed")
	}
}

// TestDriverMessagesSayDriverOnce checks that the registry's own errors,
// which wrap a sentinel, do not repeat the package prefix.
func TestDriverMessagesSayDriverOnce(t *testing.T) {
	for _, err := range []error{
		ClosedError("sim device 0", "Malloc"),
		unknownBackend("tpu", ""),
		unknownBackend("tpu", ` in ACCELKIT_DRIVER="tpu"`),
	} {
		if msg := err.Error(); strings.Count(msg, "driver:") != 1 {
			t.Errorf("%q: want \"driver:\" exactly once", msg)
		}
	}
}
