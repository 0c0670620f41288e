package hostpin

import (
	"errors"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/drivertest"
)

func newDirect(t testing.TB, dev driver.Device, opts DirectOptions) *Direct {
	t.Helper()
	d, err := NewDirect(dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

// TestDirect: every Alloc and Free goes to the driver with the exact size;
// RecordStream still holds the driver free until the stream's work ran.
func TestDirect(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	a := newDirect(t, dev, DirectOptions{})
	base := sd.Stats()
	for i := 0; i < 3; i++ {
		b, err := a.Alloc(5000)
		if err != nil {
			t.Fatal(err)
		}
		if b.Cap() != 5000 || b.Len() != 5000 || a.RoundedSize(5000) != 5000 {
			t.Errorf("Direct Alloc(5000): Cap %d, Len %d, RoundedSize %d; want exactly 5000", b.Cap(), b.Len(), a.RoundedSize(5000))
		}
		if err := a.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	s := sd.Stats()
	if s.HostAllocs-base.HostAllocs != 3 || s.HostFrees-base.HostFrees != 3 {
		t.Errorf("Direct: %d driver allocs, %d frees; want 3 and 3", s.HostAllocs-base.HostAllocs, s.HostFrees-base.HostFrees)
	}
	st := a.Stats()
	if st.Requests != 3 || st.Hits != 0 || st.Misses != 3 || st.BytesReserved != 0 || st.BytesInUse != 0 || st.DriverAllocs != 3 || st.DriverFrees != 3 {
		t.Errorf("Direct stats: %+v", st)
	}

	// RecordStream still holds the driver free until the stream's work ran.
	st2 := newStream(t, dev)
	open, err := sd.Gate(st2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := a.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RecordStream(b, st2); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(b); err != nil {
		t.Fatal(err)
	}
	a.Poll()
	if got := sd.Stats().HostFrees - s.HostFrees; got != 0 {
		t.Errorf("Direct: buffer freed to the driver while its stream was gated")
	}
	if p := a.Stats().BytesPending; p != 1<<20 {
		t.Errorf("Direct: BytesPending %d while the stream is gated, want %d", p, 1<<20)
	}
	open()
	if err := st2.Synchronize(); err != nil {
		t.Fatal(err)
	}
	a.Poll()
	if got := sd.Stats().HostFrees - s.HostFrees; got != 1 {
		t.Errorf("Direct: %d driver frees after the stream ran, want 1", got)
	}
}

func TestDirectErrors(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	if _, err := NewDirect(nil, DirectOptions{}); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("NewDirect(nil) = %v, want driver.ErrInvalidValue", err)
	}
	_, err := NewDirect(dev, DirectOptions{MaxSize: -1})
	if !errors.Is(err, driver.ErrInvalidValue) || !strings.Contains(err.Error(), "DirectOptions.MaxSize") {
		t.Errorf("NewDirect(MaxSize -1) = %v, want driver.ErrInvalidValue naming DirectOptions.MaxSize", err)
	}
	d := newDirect(t, dev, DirectOptions{MaxSize: 1 << 20})
	if got := d.Options().MaxSize; got != 1<<20 {
		t.Errorf("Options().MaxSize = %d", got)
	}
	if _, err := d.Alloc(1<<20 + 1); !errors.Is(err, ErrInvalidSize) || !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("Alloc above MaxSize = %v, want ErrInvalidSize", err)
	}
	a := newAlloc(t, dev, Options{})
	ab := mustAlloc(t, a, 4096)
	defer mustFree(t, a, ab)
	if err := d.Free(ab); !errors.Is(err, ErrForeignBuffer) {
		t.Errorf("Direct.Free of an Allocator's buffer = %v, want ErrForeignBuffer", err)
	}
	db, err := d.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Free(db); !errors.Is(err, ErrForeignBuffer) {
		t.Errorf("Allocator.Free of a Direct's buffer = %v, want ErrForeignBuffer", err)
	}
	if err := d.Free(db); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(db); !errors.Is(err, ErrDoubleFree) {
		t.Errorf("second Free = %v, want ErrDoubleFree", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(10); !errors.Is(err, ErrClosed) || !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Alloc after Close = %v, want ErrClosed wrapping driver.ErrClosed", err)
	}
}

// TestStagerOnDirect: the Stager takes a Direct as its Source and copies
// exactly; every chunk goes back to the driver.
func TestStagerOnDirect(t *testing.T) {
	dev, sd := drivertest.OpenDevice(t, "sim", "")
	d := newDirect(t, dev, DirectOptions{})
	const chunk = 64 << 10
	sg := newStager(t, d, StagerOptions{ChunkSize: chunk, Workers: 2})
	st := newStream(t, dev)
	n := 7*chunk + 5
	dptr := devMalloc(t, dev, n)
	base := sd.Stats()
	roundTrip(t, sg, dev, st, dptr, pattern(n, 11))
	if err := st.Synchronize(); err != nil {
		t.Fatal(err)
	}
	d.Poll()
	s := sd.Stats()
	if allocs, frees := s.HostAllocs-base.HostAllocs, s.HostFrees-base.HostFrees; allocs == 0 || allocs != frees {
		t.Errorf("staging through Direct: %d driver allocations, %d frees; want equal and non-zero", allocs, frees)
	}
	if st := d.Stats(); st.BytesInUse != 0 || st.BytesPending != 0 || st.Hits != 0 {
		t.Errorf("Direct stats after staging: %+v", st)
	}
}
