package sim_test

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/accelkit/accelkit/driver"
	"github.com/accelkit/accelkit/driver/sim"
)

func TestFreeStrictness(t *testing.T) {
	drv := open(t, "capacity=64MiB")
	dev, _ := device(t, drv, 0)
	p := mustMalloc(t, dev, 4096)
	if err := dev.Free(p + 16); err == nil || !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("Free(interior pointer) = %v, want ErrInvalidPointer", err)
	}
	if err := dev.Free(p); err != nil {
		t.Fatalf("Free: %v", err)
	}
	wantErr(t, "double Free", dev.Free(p), []error{driver.ErrInvalidPointer}, "already freed")
	wantErr(t, "Free(unknown)", dev.Free(0x1000), []error{driver.ErrInvalidPointer}, "0x1000")
	if err := dev.Free(0); err != nil {
		t.Errorf("Free(0) = %v, want nil", err)
	}
	if q, err := dev.Malloc(0); q != 0 || err != nil {
		t.Errorf("Malloc(0) = %v, %v; want 0, nil", q, err)
	}
}

func TestCapacity(t *testing.T) {
	drv := open(t, "capacity=1MiB")
	dev, h := device(t, drv, 0)
	free, total, err := dev.MemInfo()
	if err != nil || free != 1<<20 || total != 1<<20 {
		t.Fatalf("MemInfo = %d, %d, %v; want 1MiB free of 1MiB", free, total, err)
	}
	p := mustMalloc(t, dev, 1000) // charged a page
	free, _, _ = dev.MemInfo()
	if want := uint64(1<<20) - 4096; free > want {
		t.Errorf("MemInfo free after Malloc(1000) = %d, want <= %d", free, want)
	}
	_, err = dev.Malloc(1 << 20)
	wantErr(t, "Malloc over capacity", err, []error{driver.ErrOutOfMemory}, "requested 1048576", "capacity 1048576", "free")
	_, err = dev.Malloc(1 << 63)
	wantErr(t, "Malloc(1<<63)", err, []error{driver.ErrOutOfMemory})
	_, err = dev.Malloc(^uint64(0))
	wantErr(t, "Malloc(max)", err, []error{driver.ErrOutOfMemory})
	if err := dev.Free(p); err != nil {
		t.Fatal(err)
	}
	q := mustMalloc(t, dev, 1<<20) // the whole capacity again
	if st := h.Stats(); st.BytesAllocated != 1<<20 || st.Mallocs != 2 || st.Frees != 1 {
		t.Errorf("Stats = %+v", st)
	}
	dev.Free(q)
	if free, _, _ := dev.MemInfo(); free != 1<<20 {
		t.Errorf("MemInfo free after freeing everything = %d, want %d", free, 1<<20)
	}
}

func TestCopyBounds(t *testing.T) {
	drv := open(t, "capacity=64MiB")
	dev, _ := device(t, drv, 0)
	s := dev.DefaultStream()
	p := mustMalloc(t, dev, 4096)
	q := mustMalloc(t, dev, 4096)
	hb := mustHost(t, dev, 8192)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"CopyHtoD past the end", dev.CopyHtoD(p+4000, hb.Bytes()[:200], s), driver.ErrInvalidValue},
		{"CopyDtoH past the end", dev.CopyDtoH(hb.Bytes()[:4097], p, s), driver.ErrInvalidValue},
		{"CopyDtoD spanning two allocations", dev.CopyDtoD(q, p, 8192, s), driver.ErrInvalidValue},
		{"CopyDtoD from unknown", dev.CopyDtoD(q, 0x2000, 16, s), driver.ErrInvalidPointer},
		{"Memset past the end", dev.Memset(p+1, 0, 4096, s), driver.ErrInvalidValue},
		{"Memset unknown", dev.Memset(0x3000, 0, 1, s), driver.ErrInvalidPointer},
		{"CopyHtoDSync past the end", dev.CopyHtoDSync(p+4095, make([]byte, 2)), driver.ErrInvalidValue},
		{"CopyDtoHSync unknown", dev.CopyDtoHSync(make([]byte, 2), 0x4000), driver.ErrInvalidPointer},
		{"Memset overflowing the address space", dev.Memset(p, 0, ^uint64(0), s), driver.ErrInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, tt.name, tt.err, []error{tt.want}, "0x")
		})
	}
	if err := s.Synchronize(); err != nil {
		t.Errorf("refused copies left a sticky error: %v", err)
	}
}

func TestCopyIntoFreedMemory(t *testing.T) {
	drv := open(t, "capacity=64MiB")
	dev, h := device(t, drv, 0)
	s, _ := dev.NewStream()
	p := mustMalloc(t, dev, 4096)
	hb := mustHost(t, dev, 4096)
	before, _ := dev.NewEvent()
	if err := before.Record(s); err != nil {
		t.Fatal(err)
	}
	open, err := h.Gate(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.CopyHtoD(p, hb.Bytes(), s); err != nil {
		t.Fatal(err)
	}
	after, _ := dev.NewEvent()
	if err := after.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := dev.Free(p); err != nil {
		t.Fatal(err)
	}
	open()
	wantErr(t, "Synchronize after copy into freed memory", s.Synchronize(), []error{driver.ErrInvalidPointer}, "CopyHtoD", "no longer valid")
	if _, err := s.Query(); !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("Query after the failure = %v; the error must be sticky", err)
	}
	if done, err := before.Query(); !done || err != nil {
		t.Errorf("event recorded before the failure: Query = %v, %v; want done, nil", done, err)
	}
	if done, err := after.Query(); !done || !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("event recorded after the failing copy: Query = %v, %v; want done with the error", done, err)
	}
	if err := dev.Memset(mustMalloc(t, dev, 16), 1, 16, s); err == nil {
		t.Error("Memset on a stream with a sticky error was accepted")
	}
}

func TestHostBufferFreedBeforeCopy(t *testing.T) {
	drv := open(t, "capacity=64MiB")
	dev, h := device(t, drv, 0)
	s, _ := dev.NewStream()
	p := mustMalloc(t, dev, 4096)
	hb := mustHost(t, dev, 4096)
	open, _ := h.Gate(s)
	if err := dev.CopyDtoH(hb.Bytes(), p, s); err != nil {
		t.Fatal(err)
	}
	if err := dev.HostFree(hb); err != nil {
		t.Fatal(err)
	}
	open()
	wantErr(t, "copy to a host buffer freed before it ran", s.Synchronize(), []error{driver.ErrNotPinned}, "host buffer was freed")
}

func TestNotPinned(t *testing.T) {
	drv := open(t, "devices=2,capacity=64MiB")
	dev, _ := device(t, drv, 0)
	other, _ := device(t, drv, 1)
	p := mustMalloc(t, dev, 8192)
	hb := mustHost(t, dev, 4096)
	foreign := mustHost(t, other, 4096)
	small := mustHost(t, dev, 100)
	goMem := make([]byte, 4096)
	s := dev.DefaultStream()
	tests := []struct {
		name string
		err  error
	}{
		{"CopyHtoD from Go memory", dev.CopyHtoD(p, goMem, s)},
		{"CopyDtoH to Go memory", dev.CopyDtoH(goMem, p, s)},
		{"CopyHtoD from another device's buffer", dev.CopyHtoD(p, foreign.Bytes(), s)},
		// HostAlloc(100) maps a whole page; a slice running past the 100
		// bytes is readable memory but not inside the buffer.
		{"CopyDtoH past the buffer end", dev.CopyDtoH(unsafe.Slice(&small.Bytes()[0], 200), p, s)},
	}
	for _, tt := range tests {
		wantErr(t, tt.name, tt.err, []error{driver.ErrNotPinned}, "HostBuffer")
	}
	if err := dev.CopyHtoD(p, hb.Bytes()[10:20], s); err != nil {
		t.Errorf("CopyHtoD from a sub-slice of a HostBuffer: %v", err)
	}
	if err := dev.CopyHtoDSync(p, goMem); err != nil {
		t.Errorf("CopyHtoDSync from Go memory: %v", err)
	}
	if err := dev.HostFree(hb); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "CopyHtoD from a freed HostBuffer", dev.CopyHtoD(p, hb.Bytes(), s), []error{driver.ErrNotPinned})
}

func TestHostFreeStrictness(t *testing.T) {
	drv := open(t, "devices=2,capacity=64MiB")
	dev, h := device(t, drv, 0)
	other, _ := device(t, drv, 1)
	hb := mustHost(t, dev, 100)
	if hb.Len() != 100 || hb.Device() != dev {
		t.Errorf("HostAlloc(100): Len %d, Device %v", hb.Len(), hb.Device())
	}
	if err := other.HostFree(hb); !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("HostFree on another device = %v, want ErrInvalidPointer", err)
	}
	if err := dev.HostFree(driver.NewHostBuffer(dev, make([]byte, 10), nil)); !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("HostFree of a foreign buffer = %v, want ErrInvalidPointer", err)
	}
	if err := dev.HostFree(nil); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("HostFree(nil) = %v, want ErrInvalidValue", err)
	}
	if err := dev.HostFree(hb); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "double HostFree", dev.HostFree(hb), []error{driver.ErrInvalidPointer}, "already freed")

	empty := mustHost(t, dev, 0)
	if empty.Len() != 0 {
		t.Errorf("HostAlloc(0).Len() = %d", empty.Len())
	}
	if err := dev.HostFree(empty); err != nil {
		t.Errorf("HostFree(empty) = %v", err)
	}
	if err := dev.HostFree(empty); !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("double HostFree(empty) = %v, want ErrInvalidPointer", err)
	}
	if _, err := dev.HostAlloc(-1); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("HostAlloc(-1) = %v, want ErrInvalidValue", err)
	}
	if st := h.Stats(); st.HostAllocs != 1 || st.HostFrees != 1 {
		t.Errorf("Stats: HostAllocs %d, HostFrees %d; want 1, 1 (empty buffers cost nothing)", st.HostAllocs, st.HostFrees)
	}
}

func TestDestroyedStreamAndEvent(t *testing.T) {
	drv := open(t, "devices=2,capacity=64MiB")
	dev, _ := device(t, drv, 0)
	other, _ := device(t, drv, 1)
	p := mustMalloc(t, dev, 64)
	hb := mustHost(t, dev, 64)
	s, _ := dev.NewStream()
	e, _ := dev.NewEvent()
	if err := s.Destroy(); err != nil {
		t.Fatal(err)
	}
	valErr := []error{driver.ErrInvalidValue}
	wantErr(t, "CopyHtoD on destroyed stream", dev.CopyHtoD(p, hb.Bytes(), s), valErr, "destroyed")
	wantErr(t, "Memset on destroyed stream", dev.Memset(p, 0, 1, s), valErr, "destroyed")
	_, err := s.Query()
	wantErr(t, "Query on destroyed stream", err, valErr, "destroyed")
	wantErr(t, "Synchronize on destroyed stream", s.Synchronize(), valErr, "destroyed")
	wantErr(t, "WaitEvent on destroyed stream", s.WaitEvent(e), valErr, "destroyed")
	wantErr(t, "Record on destroyed stream", e.Record(s), valErr, "destroyed")
	wantErr(t, "Destroy twice", s.Destroy(), valErr, "destroyed")
	wantErr(t, "Destroy default stream", dev.DefaultStream().Destroy(), valErr, "default stream")

	os, _ := other.NewStream()
	wantErr(t, "Memset on another device's stream", dev.Memset(p, 0, 1, os), valErr, "not a stream of this device")
	wantErr(t, "Record on another device's stream", e.Record(os), valErr)

	if err := e.Destroy(); err != nil {
		t.Fatal(err)
	}
	_, err = e.Query()
	wantErr(t, "Query on destroyed event", err, valErr, "destroyed")
	wantErr(t, "Record on destroyed event", e.Record(dev.DefaultStream()), valErr, "destroyed")
	wantErr(t, "Synchronize on destroyed event", e.Synchronize(), valErr, "destroyed")
	wantErr(t, "WaitEvent on destroyed event", dev.DefaultStream().WaitEvent(e), valErr, "destroyed")
	wantErr(t, "Destroy event twice", e.Destroy(), valErr, "destroyed")
}

func TestClosedDriver(t *testing.T) {
	drv, err := sim.Open("capacity=64MiB")
	if err != nil {
		t.Fatal(err)
	}
	dev, h := device(t, drv, 0)
	vmm, hasVMM := driver.AsVMM(dev) // not on Windows
	peer, _ := driver.AsPeer(dev)
	p := mustMalloc(t, dev, 64)
	hb := mustHost(t, dev, 64)
	s, _ := dev.NewStream()
	e, _ := dev.NewEvent()
	open, _ := h.Gate(s) // never opened: Close must not hang on it
	_ = open
	if err := dev.Memset(p, 1, 64, s); err != nil {
		t.Fatal(err)
	}
	if err := drv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := drv.Close(); err != nil {
		t.Errorf("second Close = %v; want nil (Close is idempotent)", err)
	}
	calls := map[string]error{
		"Malloc":          second(dev.Malloc(64)),
		"Malloc(0)":       second(dev.Malloc(0)),
		"Free":            dev.Free(p),
		"HostAlloc":       second(dev.HostAlloc(64)),
		"HostFree":        dev.HostFree(hb),
		"NewStream":       second(dev.NewStream()),
		"NewEvent":        second(dev.NewEvent()),
		"CopyHtoD":        dev.CopyHtoD(p, hb.Bytes(), s),
		"CopyDtoH":        dev.CopyDtoH(hb.Bytes(), p, s),
		"CopyDtoD":        dev.CopyDtoD(p, p, 1, s),
		"Memset":          dev.Memset(p, 0, 1, s),
		"CopyHtoDSync":    dev.CopyHtoDSync(p, []byte{1}),
		"CopyDtoHSync":    dev.CopyDtoHSync([]byte{1}, p),
		"Synchronize":     dev.Synchronize(),
		"MemInfo":         third(dev.MemInfo()),
		"Stream.Query":    second(s.Query()),
		"Stream.Sync":     s.Synchronize(),
		"Stream.Wait":     s.WaitEvent(e),
		"Stream.Destroy":  s.Destroy(),
		"Event.Record":    e.Record(s),
		"Event.Query":     second(e.Query()),
		"Event.Sync":      e.Synchronize(),
		"Event.Destroy":   e.Destroy(),
		"Device":          second(drv.Device(0)),
		"Gate":            second(h.Gate(s)),
		"CanAccessPeer":   second(peer.CanAccessPeer(dev)),
		"Properties":      second(dev.(driver.PropertiesDevice).Properties()),
		"DefaultStream.Q": second(dev.DefaultStream().Query()),
	}
	if hasVMM {
		calls["AddressReserve"] = second(vmm.AddressReserve(2<<20, 0))
		calls["MemCreate"] = second(vmm.MemCreate(2 << 20))
	}
	for name, err := range calls {
		if !errors.Is(err, driver.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func third[A, B any](_ A, _ B, err error) error { return err }
