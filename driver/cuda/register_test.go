//go:build linux && cgo

package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/cuda/cudatest"
)

// hostReg returns d's HostRegisterDevice.
func hostReg(t *testing.T, d driver.Device) driver.HostRegisterDevice {
	t.Helper()
	hr, ok := driver.AsHostRegister(d)
	if !ok {
		t.Fatalf("device %T offers no HostRegisterDevice", d)
	}
	return hr
}

// TestHostRegisterOnFake checks what the backend asks of the driver: flags
// 0, a cuCtxSynchronize before each cuMemHostUnregister, and no driver
// call for the misuse it refuses itself.
func TestHostRegisterOnFake(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d0, d1 := dev(t, drv, 0), dev(t, drv, 1)
	hr0, hr1 := hostReg(t, d0), hostReg(t, d1)
	mem := make([]byte, 3*4096+5)
	b, err := hr0.HostRegister(mem[1:]) // any byte range: cuMemHostRegister_v2 needs no alignment
	if err != nil {
		t.Fatal(err)
	}
	if f := l.LastFlags("cuMemHostRegister_v2"); f != 0 {
		t.Errorf("cuMemHostRegister_v2 flags %#x; want 0", f)
	}
	if n := l.Live(cudatest.LiveHostReg); n != 1 {
		t.Errorf("%d registrations in the driver; want 1", n)
	}
	ha, err := d0.HostAlloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	calls := l.Counter("cuMemHostRegister_v2")
	for name, call := range map[string]func() error{
		"overlapping its own registration":    func() error { _, err := hr0.HostRegister(mem[:10]); return err },
		"overlapping device 0's registration": func() error { _, err := hr1.HostRegister(mem[4096:8192]); return err },
		"of a HostAlloc buffer":               func() error { _, err := hr1.HostRegister(ha.Bytes()); return err },
	} {
		if err := call(); !errors.Is(err, driver.ErrAlreadyRegistered) {
			t.Errorf("HostRegister %s = %v; want ErrAlreadyRegistered", name, err)
		}
	}
	if n := l.Counter("cuMemHostRegister_v2") - calls; n != 0 {
		t.Errorf("refused registrations made %d driver calls; want 0", n)
	}

	syncs, unregs := l.Counter("cuCtxSynchronize"), l.Counter("cuMemHostUnregister")
	if err := hr0.HostUnregister(b); err != nil {
		t.Fatal(err)
	}
	if n := l.Counter("cuCtxSynchronize") - syncs; n != 1 {
		t.Errorf("HostUnregister made %d cuCtxSynchronize calls; want 1 (queued copies finish before the memory is unpinned)", n)
	}
	for name, err := range map[string]error{
		"twice":                 hr0.HostUnregister(b),
		"of a HostAlloc buffer": hr0.HostUnregister(ha),
	} {
		if !errors.Is(err, driver.ErrNotRegistered) {
			t.Errorf("HostUnregister %s = %v; want ErrNotRegistered", name, err)
		}
	}
	if n := l.Counter("cuMemHostUnregister") - unregs; n != 1 {
		t.Errorf("%d cuMemHostUnregister calls; want 1 (misuse is refused without one)", n)
	}
	if n := l.Live(cudatest.LiveHostReg); n != 0 {
		t.Errorf("%d registrations left in the driver; want 0", n)
	}
	if err := d0.HostFree(ha); err != nil {
		t.Fatal(err)
	}
}

// TestHostRegisterDriverErrors checks the driver's own answers: another
// registrant's range (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED), and
// failures of registering, of the wait before unregistering and of
// unregistering, after which the registration is as it was.
func TestHostRegisterDriverErrors(t *testing.T) {
	l := buildFake(t, nil)
	drv := openFake(t, l)
	d := dev(t, drv, 0)
	hr := hostReg(t, d)
	mem := make([]byte, 8192)

	// A second driver on the same library: the fake, as CUDA, tracks
	// registrations process-wide, beyond what this backend knows.
	other := hostReg(t, dev(t, openFake(t, l), 0))
	ob, err := other.HostRegister(mem[:100])
	if err != nil {
		t.Fatal(err)
	}
	_, err = hr.HostRegister(mem[50:150])
	var de *driver.Error
	if !errors.Is(err, driver.ErrAlreadyRegistered) || !errors.As(err, &de) || de.Name != "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED" {
		t.Errorf("HostRegister of another registrant's range = %v; want CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED as ErrAlreadyRegistered", err)
	}
	if err := other.HostUnregister(ob); err != nil {
		t.Fatal(err)
	}

	if err := l.Fail("cuMemHostRegister_v2", errOutOfMemory, 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := hr.HostRegister(mem); !errors.Is(err, driver.ErrOutOfMemory) {
		t.Errorf("HostRegister failing in the driver = %v; want ErrOutOfMemory", err)
	}
	b, err := hr.HostRegister(mem) // the failed attempt left nothing behind
	if err != nil {
		t.Fatalf("HostRegister after a failed one: %v", err)
	}
	p, err := d.Malloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)

	for _, tc := range []struct {
		fn, op string
		code   int
		want   error
	}{
		{"cuCtxSynchronize", "cuCtxSynchronize", errInvalidValue, driver.ErrInvalidValue},
		{"cuMemHostUnregister", "cuMemHostUnregister", errHostMemNotRegistered, driver.ErrNotRegistered},
	} {
		if err := l.Fail(tc.fn, tc.code, 0, 1); err != nil {
			t.Fatal(err)
		}
		err := hr.HostUnregister(b)
		if !errors.Is(err, tc.want) || !errors.As(err, &de) || de.Op != tc.op {
			t.Errorf("HostUnregister with %s failing = %v; want %v from %s", tc.fn, err, tc.want, tc.op)
		}
		if err := d.CopyHtoD(p, b.Bytes(), nil); err != nil {
			t.Errorf("CopyHtoD after a failed HostUnregister = %v; want the registration still live", err)
		}
	}
	if err := hr.HostUnregister(b); err != nil {
		t.Errorf("HostUnregister after failed ones = %v", err)
	}
}

// TestCloseEndsRegistrations checks that Close unregisters what is still
// registered, on a live device and on a lost one, and that the calls after
// it are ErrClosed.
func TestCloseEndsRegistrations(t *testing.T) {
	l := buildFake(t, nil)
	drv, err := Open("lib=" + l.Path)
	if err != nil {
		t.Fatal(err)
	}
	d0, d1 := dev(t, drv, 0), dev(t, drv, 1)
	mem := make([]byte, 2*4096)
	b0, err := hostReg(t, d0).HostRegister(mem[:4096])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hostReg(t, d1).HostRegister(mem[4096:]); err != nil {
		t.Fatal(err)
	}
	if err := l.Poison(1, errIllegalAddress); err != nil { // device 1 lost: its unregistration fails
		t.Fatal(err)
	}
	unregs := l.Counter("cuMemHostUnregister")
	if err := drv.Close(); err != nil {
		t.Fatalf("Close with live registrations = %v", err)
	}
	if n := l.Counter("cuMemHostUnregister") - unregs; n != 1 {
		t.Errorf("Close made %d cuMemHostUnregister calls; want 1 (the lost device's fails at its wait)", n)
	}
	if n := l.Live(cudatest.LiveHostReg); n != 0 {
		t.Errorf("%d registrations left after Close; want 0 (the released contexts took the rest)", n)
	}
	if err := hostReg(t, d0).HostUnregister(b0); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("HostUnregister after Close = %v; want ErrClosed", err)
	}
	_, err = hostReg(t, d0).HostRegister(mem)
	if !errors.Is(err, driver.ErrClosed) || !strings.Contains(err.Error(), "HostRegister") {
		t.Errorf("HostRegister after Close = %v; want ErrClosed naming HostRegister", err)
	}
}
