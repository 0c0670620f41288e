package drivertest

// The error rules: destroyed streams and events, a failure of queued work
// sticky on its stream, a lost device, and a closed driver. Failures on
// demand come from the optional Faults capability.

import (
	"bytes"
	"errors"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/backendkit"
)

// Faults is the optional fault-injection capability of a test backend's
// device (driver/sim offers it), found by type assertion on the Device or,
// when the Device is a backendkit.Compose wrapper, on the device it wraps
// (backendkit.Unwrap, repeatedly): a backend that composes its capabilities
// keeps its test hooks on its own device type.
type Faults interface {
	// FailStream makes the next work item queued on s fail when it runs.
	FailStream(s driver.Stream)
	// LoseDevice makes every later call on the device fail with
	// driver.ErrDeviceLost.
	LoseDevice()
}

// faults returns the device's fault hooks or skips the test.
func faults(t *testing.T, e *env) Faults {
	t.Helper()
	for d := e.dev; d != nil; d = backendkit.Unwrap(d) {
		if f, ok := d.(Faults); ok {
			return f
		}
	}
	t.Skipf("%s device %T offers no drivertest.Faults", e.drv.Name(), e.dev)
	return nil
}

func testDestroyed(t *testing.T, e *env) {
	d := e.dev
	p := e.malloc(t, 4096)
	s, err := d.NewStream()
	must(t, "NewStream", err)
	must(t, "Memset", d.Memset(p, 1, 4096, s))
	must(t, "Destroy of a stream with queued work succeeds", s.Destroy())
	mustIs(t, "Memset on a destroyed stream is ErrInvalidValue", d.Memset(p, 1, 1, s), driver.ErrInvalidValue)
	mustIs(t, "Synchronize on a destroyed stream is ErrInvalidValue", s.Synchronize(), driver.ErrInvalidValue)
	_, err = s.Query()
	mustIs(t, "Query on a destroyed stream is ErrInvalidValue", err, driver.ErrInvalidValue)
	mustIs(t, "Destroy twice is ErrInvalidValue", s.Destroy(), driver.ErrInvalidValue)
	if err := d.DefaultStream().Destroy(); err == nil {
		t.Error("rule: the default stream cannot be destroyed")
	}

	ev, err := d.NewEvent()
	must(t, "NewEvent", err)
	mustIs(t, "Record on a destroyed stream is ErrInvalidValue", ev.Record(s), driver.ErrInvalidValue)
	must(t, "Record", ev.Record(d.DefaultStream()))
	must(t, "Event.Destroy", ev.Destroy())
	_, err = ev.Query()
	mustIs(t, "Query on a destroyed event is ErrInvalidValue", err, driver.ErrInvalidValue)
	mustIs(t, "Record on a destroyed event is ErrInvalidValue", ev.Record(d.DefaultStream()), driver.ErrInvalidValue)
	mustIs(t, "Synchronize on a destroyed event is ErrInvalidValue", ev.Synchronize(), driver.ErrInvalidValue)
	mustIs(t, "WaitEvent on a destroyed event is ErrInvalidValue", d.DefaultStream().WaitEvent(ev), driver.ErrInvalidValue)
	mustIs(t, "Destroy of an event twice is ErrInvalidValue", ev.Destroy(), driver.ErrInvalidValue)
	must(t, "the device works after misuse", d.Synchronize())
}

func testSticky(t *testing.T, e *env) {
	f := faults(t, e)
	d := e.dev
	s := e.stream(t)
	p := e.malloc(t, 4096)
	before := e.event(t)
	must(t, "Record", before.Record(s))
	must(t, "Event.Synchronize", before.Synchronize())
	f.FailStream(s)
	if err := d.Memset(p, 1, 4096, s); err != nil {
		mustIs(t, "work queued after FailStream fails with a driver sentinel", err, driver.ErrInvalidValue, driver.ErrDeviceLost)
	}
	after := e.event(t)
	recErr := after.Record(s)
	err := s.Synchronize()
	mustIs(t, "a failure of queued work is returned by Stream.Synchronize", err, driver.ErrInvalidValue, driver.ErrDeviceLost)
	lost := errors.Is(err, driver.ErrDeviceLost)
	_, err = s.Query()
	mustIs(t, "the failure is sticky: Stream.Query returns it", err, driver.ErrInvalidValue, driver.ErrDeviceLost)
	mustIs(t, "the failure is sticky: a second Synchronize returns it", s.Synchronize(), driver.ErrInvalidValue, driver.ErrDeviceLost)
	if recErr == nil {
		_, err = after.Query()
		mustIs(t, "an event recorded after the failed work reports the failure", err, driver.ErrInvalidValue, driver.ErrDeviceLost)
	}
	if lost {
		return // a context-wide failure fails every stream: nothing more to check
	}
	if _, err := before.Query(); err != nil {
		t.Errorf("rule: an event recorded before the failed work does not report it: %v", err)
	}
	other := e.stream(t)
	must(t, "Memset on another stream", d.Memset(p, 2, 4096, other))
	must(t, "a per-stream failure does not fail other streams", other.Synchronize())
}

func testDeviceLost(t *testing.T, e *env) {
	f := faults(t, e)
	d := e.dev
	s := e.stream(t)
	ev := e.event(t)
	p := e.malloc(t, 4096)
	b := e.host(t, 4096)
	f.LoseDevice()
	_, err := d.Malloc(4096)
	mustIs(t, "Malloc on a lost device is ErrDeviceLost", err, driver.ErrDeviceLost)
	mustIs(t, "Memset on a lost device is ErrDeviceLost", d.Memset(p, 0, 1, s), driver.ErrDeviceLost)
	mustIs(t, "CopyHtoD on a lost device is ErrDeviceLost", d.CopyHtoD(p, b.Bytes(), s), driver.ErrDeviceLost)
	mustIs(t, "CopyDtoHSync on a lost device is ErrDeviceLost", d.CopyDtoHSync(make([]byte, 1), p), driver.ErrDeviceLost)
	mustIs(t, "Stream.Synchronize on a lost device is ErrDeviceLost", s.Synchronize(), driver.ErrDeviceLost)
	mustIs(t, "Event.Record on a lost device is ErrDeviceLost", ev.Record(s), driver.ErrDeviceLost)
	mustIs(t, "Device.Synchronize on a lost device is ErrDeviceLost", d.Synchronize(), driver.ErrDeviceLost)
	_, err = d.NewStream()
	mustIs(t, "NewStream on a lost device is ErrDeviceLost", err, driver.ErrDeviceLost)
	_, err = ev.Query()
	mustIs(t, "Event.Query on a lost device is ErrDeviceLost", err, driver.ErrDeviceLost)
}

func testClosed(t *testing.T, e *env) {
	d := e.dev
	s := e.stream(t)
	p, err := d.Malloc(4096)
	must(t, "Malloc", err)
	must(t, "Memset", d.Memset(p, 1, 4096, s))
	hr, _ := driver.AsHostRegister(d)
	var reg *driver.HostBuffer // live at Close, where the device offers registration
	regMem := make([]byte, 4096)
	if hr != nil {
		pattern(regMem, 5)
		reg = e.register(t, hr, regMem)
	}
	must(t, "Close", e.drv.Close())
	e.closed = true
	must(t, "Close is idempotent: a second Close returns nil", e.drv.Close())
	_, err = d.Malloc(4096)
	mustIs(t, "Malloc after Close is ErrClosed", err, driver.ErrClosed)
	mustIs(t, "Free after Close is ErrClosed", d.Free(p), driver.ErrClosed)
	mustIs(t, "Memset after Close is ErrClosed", d.Memset(p, 0, 1, d.DefaultStream()), driver.ErrClosed)
	mustIs(t, "Stream.Synchronize after Close is ErrClosed", s.Synchronize(), driver.ErrClosed)
	_, err = d.NewEvent()
	mustIs(t, "NewEvent after Close is ErrClosed", err, driver.ErrClosed)
	_, err = e.drv.Device(0)
	mustIs(t, "Driver.Device after Close is ErrClosed", err, driver.ErrClosed)
	if reg != nil {
		_, err = hr.HostRegister(make([]byte, 64))
		mustIs(t, "HostRegister after Close is ErrClosed", err, driver.ErrClosed)
		mustIs(t, "HostUnregister after Close is ErrClosed", hr.HostUnregister(reg), driver.ErrClosed)
		// Close ended the registration; the memory is the caller's, as it was.
		want := make([]byte, len(regMem))
		pattern(want, 5)
		if !bytes.Equal(regMem, want) {
			t.Error("rule: Close leaves the memory of a live registration, the caller's, as it was")
		}
		pattern(regMem, 6) // and writable
	}
}
