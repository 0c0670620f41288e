// Package drivertest is the conformance suite every accelkit driver backend
// must pass, in the manner of testing/fstest: Run opens the backend afresh
// for each subtest and checks the rules of package driver (allocation and
// capacity, copy round trips, stream order, event semantics, the nil stream
// as the default stream, pinned-memory and destroyed-object errors, sticky
// errors, error mapping, Close, and VMM, Peer and HostRegisterDevice when
// offered). A failure message names the rule that was broken.
//
// The suite uses only the driver interfaces. Checks that need failures on
// demand use the optional Faults interface when the device offers it and
// are skipped otherwise.
package drivertest

// This file is the runner: Run, the per-subtest env and the helpers the
// rules share. The rules are in memory.go, streams.go, errors.go,
// capabilities.go, registered.go and launch.go (with the kernels of
// kernels.go), and OpenDevice in open.go.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

// copySize is the size of most test buffers: large enough that a copy is
// not instantaneous on a GPU (so order bugs show), small enough to be quick
// on every backend.
const copySize = 1 << 20

// Run runs the conformance suite. open must return a freshly opened driver
// with at least one device (the subtests skip when it has none); Run closes
// it at the end of each subtest.
func Run(t *testing.T, open func(t *testing.T) driver.Driver) {
	t.Helper()
	subtests := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"Driver", testDriver},
		{"Alloc", testAlloc},
		{"HostAlloc", testHostAlloc},
		{"Copy", testCopy},
		{"SyncCopy", testSyncCopy},
		{"StreamOrder", testStreamOrder},
		{"Events", testEvents},
		{"WaitEvent", testWaitEvent},
		{"NilStream", testNilStream},
		{"NotPinned", testNotPinned},
		{"Destroyed", testDestroyed},
		{"DeviceSynchronize", testDeviceSynchronize},
		{"Concurrent", testConcurrent},
		{"StickyStreamError", testSticky},
		{"DeviceLost", testDeviceLost},
		{"Closed", testClosed},
		{"VMM", testVMM},
		{"Peer", testPeer},
		{"HostRegister", testHostRegister},
		{"HostRegisterConcurrent", testHostRegisterConcurrent},
		{"Launch", testLaunch},
		{"LaunchClosed", testLaunchClosed},
		{"LaunchFault", testLaunchFault},
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			e := newEnv(t, open)
			st.fn(t, e)
		})
	}
}

// env is one subtest's opened driver and its first device.
type env struct {
	drv    driver.Driver
	dev    driver.Device
	closed bool // the subtest closed drv itself
}

func newEnv(t *testing.T, open func(*testing.T) driver.Driver) *env {
	t.Helper()
	drv := open(t)
	if drv == nil {
		t.Fatal("open returned a nil driver")
	}
	e := &env{drv: drv}
	t.Cleanup(func() {
		if !e.closed {
			if err := drv.Close(); err != nil {
				t.Errorf("rule: Driver.Close succeeds once: %v", err)
			}
		}
	})
	if drv.DeviceCount() < 1 {
		t.Skipf("%s driver has no device", drv.Name())
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Fatalf("rule: Device(0) works when DeviceCount() > 0: %v", err)
	}
	e.dev = dev
	return e
}

// must fails the test with the rule when err is not nil.
func must(t *testing.T, rule string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("rule: %s: unexpected error: %v", rule, err)
	}
}

// mustIs fails the test unless err wraps one of want.
func mustIs(t *testing.T, rule string, err error, want ...error) {
	t.Helper()
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	if err == nil {
		t.Errorf("rule: %s: got nil error, want one wrapping %v", rule, want)
		return
	}
	t.Errorf("rule: %s: error %q wraps none of %v", rule, err, want)
}

// The helpers below (malloc, host, stream, event) free what they made when
// the subtest ends, ignoring the result: subtests free, lose or close on
// purpose (testAlloc frees a helper's allocation, testDeviceLost and
// testClosed leave every call failing), and the rules for Free, HostFree and
// Destroy are checked where those calls are made on live objects.

func (e *env) malloc(t *testing.T, n uint64) driver.Ptr {
	t.Helper()
	p, err := e.dev.Malloc(n)
	must(t, fmt.Sprintf("Malloc(%d) succeeds on a fresh device", n), err)
	if p == 0 {
		t.Fatalf("rule: Malloc(%d) of a non-zero size never returns the zero Ptr", n)
	}
	t.Cleanup(func() { _ = e.dev.Free(p) }) // best effort; see above
	return p
}

func (e *env) host(t *testing.T, n int) *driver.HostBuffer {
	t.Helper()
	b, err := e.dev.HostAlloc(n)
	must(t, fmt.Sprintf("HostAlloc(%d) succeeds", n), err)
	if b.Len() != n || len(b.Bytes()) != n {
		t.Fatalf("rule: HostAlloc(%d) returns a buffer of that length; got %d", n, b.Len())
	}
	t.Cleanup(func() { _ = e.dev.HostFree(b) }) // best effort; see above
	return b
}

func (e *env) stream(t *testing.T) driver.Stream {
	t.Helper()
	s, err := e.dev.NewStream()
	must(t, "NewStream succeeds", err)
	t.Cleanup(func() { _ = s.Destroy() }) // best effort; see above
	return s
}

func (e *env) event(t *testing.T) driver.Event {
	t.Helper()
	ev, err := e.dev.NewEvent()
	must(t, "NewEvent succeeds", err)
	t.Cleanup(func() { _ = ev.Destroy() }) // best effort; see above
	return ev
}

// pattern fills b with a sequence derived from seed.
func pattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
}

// testDriver checks the names, ordinals and identities every other
// subtest relies on; it lives with the runner for that reason.
func testDriver(t *testing.T, e *env) {
	if e.drv.Name() == "" {
		t.Error("rule: Driver.Name is the backend's registry name, not empty")
	}
	if e.drv.Version() == "" {
		t.Error("rule: Driver.Version describes the backend, not empty")
	}
	n := e.drv.DeviceCount()
	for i := range n {
		d, err := e.drv.Device(i)
		must(t, "Device(i) works for every i in [0, DeviceCount)", err)
		if d.Ordinal() != i {
			t.Errorf("rule: Device(%d).Ordinal() = %d", i, d.Ordinal())
		}
		if d.Name() == "" {
			t.Errorf("rule: Device(%d).Name() is not empty", i)
		}
	}
	for _, bad := range []int{-1, n} {
		if _, err := e.drv.Device(bad); err == nil {
			t.Errorf("rule: Device(%d) outside [0, %d) is an error", bad, n)
		}
	}
	if s := e.dev.DefaultStream(); s == nil || s.ID() != 0 || s.Device() != e.dev {
		t.Error("rule: DefaultStream has ID 0 and belongs to its device")
	}
	if pd, ok := e.dev.(driver.PropertiesDevice); ok {
		p, err := pd.Properties()
		must(t, "Properties succeeds where offered", err)
		if p.Name == "" || p.TotalMemory == 0 {
			t.Errorf("rule: Properties has a name and total memory; got %+v", p)
		}
	}
}
