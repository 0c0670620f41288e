package hostpin

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// TestRegistered: copies from and to a registered buffer take no staging
// chunk (the Allocator sees no request) and move the right bytes, a slice
// reaching outside the registration is staged, and after Close the
// same buffer is staged again.
func TestRegistered(t *testing.T) {
	ctx := context.Background()
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	a := newAlloc(t, dev, Options{})
	sg := newStager(t, a, StagerOptions{})
	st := newStream(t, dev)
	const n = 4 << 20
	dptr := devMalloc(t, dev, n)
	buf := make([]byte, n)
	copy(buf, pattern(n, 1))
	r, err := sg.Register(buf[:n/2])
	if err != nil {
		t.Fatal(err)
	}
	if &r.Bytes()[0] != &buf[0] || r.HostBuffer().Len() != n/2 {
		t.Fatal("the registration is not the caller's memory")
	}
	requests := func() uint64 { return a.Stats().Requests }

	before := requests()
	if err := sg.CopyHtoD(ctx, dptr, buf[1000:n/2], st); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n/2-1000)
	if err := dev.CopyDtoHSync(got, dptr); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, buf[1000:n/2]) {
		t.Fatal("CopyHtoD from a registered slice moved other bytes")
	}
	if requests() != before {
		t.Fatal("CopyHtoD from a registered slice took a staging chunk")
	}
	// Device to registered memory.
	want := pattern(n/2, 2)
	if err := dev.CopyHtoDSync(dptr, want); err != nil {
		t.Fatal(err)
	}
	if err := sg.CopyDtoH(ctx, buf[:n/2], dptr, st); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:n/2], want) || requests() != before {
		t.Fatal("CopyDtoH into registered memory: wrong bytes, or staged")
	}
	// Reaching past the registration: staged, and still right.
	copy(buf, pattern(n, 3))
	if err := sg.CopyHtoD(ctx, dptr, buf, st); err != nil {
		t.Fatal(err)
	}
	if requests() == before {
		t.Fatal("a slice reaching outside the registration was not staged")
	}
	got = make([]byte, n)
	st.Synchronize()
	dev.CopyDtoHSync(got, dptr)
	if !bytes.Equal(got, buf) {
		t.Fatal("staged copy of a partly registered slice moved other bytes")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	before = requests()
	if err := sg.CopyHtoD(ctx, dptr, buf[:n/2], st); err != nil {
		t.Fatal(err)
	}
	if requests() == before {
		t.Fatal("a copy from unregistered memory was not staged")
	}
}

func TestRegisterErrors(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	sg := newStager(t, newAlloc(t, dev, Options{}), StagerOptions{})
	if _, err := sg.Register(nil); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Register(nil) = %v, want ErrInvalidValue", err)
	}
	buf := make([]byte, 1<<20)
	r, err := sg.Register(buf[:4096])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := sg.Register(buf[100:8192]); !errors.Is(err, driver.ErrAlreadyRegistered) {
		t.Errorf("overlapping Register = %v, want ErrAlreadyRegistered", err)
	}

	plain, _ := drivertest.OpenDevice(t, "sim", "hostregister=false")
	a2 := newAlloc(t, plain, Options{})
	sg2 := newStager(t, a2, StagerOptions{})
	if _, err := sg2.Register(buf[8192:]); !errors.Is(err, driver.ErrNotSupported) {
		t.Errorf("Register on a device without host registration = %v, want ErrNotSupported", err)
	}
}

// TestRegisteredCloseRace: copies through a registration while two
// goroutines close it: each copy is either one DMA or staged, never lost
// or torn, both Closes return nil, and Close waits for the DMAs in flight (the strict sim fails a DMA
// that reaches memory no longer pinned). Run under -race.
func TestRegisteredCloseRace(t *testing.T) {
	ctx := context.Background()
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	sg := newStager(t, newAlloc(t, dev, Options{}), StagerOptions{})
	const n = 1 << 20
	for round := range 20 {
		buf := bytes.Clone(pattern(n, uint32(round)))
		r, err := sg.Register(buf)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 5)
		for range 3 {
			wg.Go(func() {
				st := newStream(t, dev)
				dptr := devMalloc(t, dev, n)
				if err := sg.CopyHtoD(ctx, dptr, buf, st); err != nil {
					errs <- err
					return
				}
				got := make([]byte, n)
				st.Synchronize()
				if err := dev.CopyDtoHSync(got, dptr); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, buf) {
					errs <- errors.New("copy raced with Close moved other bytes")
				}
			})
		}
		// Two Closes race the copies and each other: both return nil.
		for range 2 {
			wg.Go(func() {
				if err := r.Close(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
}

// TestRegisteredCloseAfterDeviceLost: a Close the driver fails (the device
// is lost, which ended the registration) reports the error once and ends
// the registration all the same: a second Close returns nil, as the
// convention for Close says, and the Stager no longer copies through it.
func TestRegisteredCloseAfterDeviceLost(t *testing.T) {
	dev, hooks := drivertest.OpenDevice(t, "sim", "")
	sg := newStager(t, newAlloc(t, dev, Options{}), StagerOptions{})
	buf := make([]byte, 1<<16)
	r, err := sg.Register(buf)
	if err != nil {
		t.Fatal(err)
	}
	hooks.LoseDevice()
	if err := r.Close(); !errors.Is(err, driver.ErrDeviceLost) {
		t.Errorf("Close on a lost device = %v, want an error wrapping driver.ErrDeviceLost", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close after a failed one = %v, want nil", err)
	}
	if got := sg.regs.find(buf); got != nil {
		t.Error("the Stager still copies through a closed registration")
	}
}
