package sim_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

func TestVMM(t *testing.T) {
	drv := open(t, "capacity=64MiB")
	dev, h := device(t, drv, 0)
	vmm := needVMM(t, dev)
	g := vmm.Granularity()
	if g != 2<<20 {
		t.Errorf("Granularity = %d, want 2 MiB", g)
	}
	r, err := vmm.AddressReserve(4*g, 8*g)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(r)%(8*g) != 0 {
		t.Errorf("AddressReserve alignment 16 MiB gave %v", r)
	}
	hb := mustHost(t, dev, int(2*g))
	s := dev.DefaultStream()
	// Nothing is usable before it is mapped and access is granted.
	wantErr(t, "copy into a reserved, unmapped range", dev.CopyHtoD(r, hb.Bytes()[:16], s), []error{driver.ErrInvalidValue}, "not wholly mapped")

	m, err := vmm.MemCreate(2 * g)
	if err != nil {
		t.Fatal(err)
	}
	if free, _, _ := dev.MemInfo(); free != 64<<20-2*g {
		t.Errorf("MemCreate(4 MiB) left %d free, want %d", free, 64<<20-2*g)
	}
	// Map the handle's second granule at the reservation's second granule
	// and its first at the third: a block spanning both is one range.
	if err := vmm.MemMap(r+driver.Ptr(g), g, g, m); err != nil {
		t.Fatal(err)
	}
	if err := vmm.MemMap(r+driver.Ptr(2*g), g, 0, m); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "copy before SetAccess", dev.CopyHtoD(r+driver.Ptr(g), hb.Bytes()[:16], s), []error{driver.ErrInvalidValue})
	if err := vmm.SetAccess(r+driver.Ptr(g), 2*g); err != nil {
		t.Fatal(err)
	}
	for i := range hb.Bytes() {
		hb.Bytes()[i] = byte(i % 251)
	}
	if err := dev.CopyHtoD(r+driver.Ptr(g), hb.Bytes(), s); err != nil {
		t.Fatalf("copy across two mapped granules: %v", err)
	}
	out := mustHost(t, dev, int(2*g))
	if err := dev.CopyDtoH(out.Bytes(), r+driver.Ptr(g), s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), hb.Bytes()) {
		t.Fatal("VMM round trip changed the data")
	}
	wantErr(t, "copy running into an unmapped granule", dev.CopyHtoD(r+driver.Ptr(2*g), hb.Bytes(), s), []error{driver.ErrInvalidValue})

	bad := []struct {
		name string
		err  error
	}{
		{"MemMap misaligned address", vmm.MemMap(r+4096, g, 0, m)},
		{"MemMap misaligned size", vmm.MemMap(r, 4096, 0, m)},
		{"MemMap misaligned offset", vmm.MemMap(r, g, 4096, m)},
		{"MemMap past the handle", vmm.MemMap(r, 2*g, g, m)},
		{"MemMap over a mapping", vmm.MemMap(r+driver.Ptr(g), g, 0, m)},
		{"MemMap outside a reservation", vmm.MemMap(r+driver.Ptr(4*g), g, 0, m)},
		{"MemMap unknown handle", vmm.MemMap(r, g, 0, m+100)},
		{"MemCreate misaligned", second(vmm.MemCreate(g + 1))},
		{"MemCreate zero", second(vmm.MemCreate(0))},
		{"AddressReserve misaligned", second(vmm.AddressReserve(g/2, 0))},
		{"AddressReserve odd alignment", second(vmm.AddressReserve(g, 3<<20))},
		{"SetAccess unmapped", vmm.SetAccess(r, g)},
		{"MemUnmap unmapped", vmm.MemUnmap(r, g)},
		{"AddressFree while mapped", vmm.AddressFree(r, 4*g)},
	}
	for _, b := range bad {
		if !errors.Is(b.err, driver.ErrInvalidValue) {
			t.Errorf("%s = %v, want ErrInvalidValue", b.name, b.err)
		}
	}
	_, err = vmm.MemCreate(64 << 20)
	wantErr(t, "MemCreate over capacity", err, []error{driver.ErrOutOfMemory}, "capacity")
	if err := dev.Free(r); !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("Free of a reservation = %v, want ErrInvalidPointer", err)
	}

	// Release while mapped keeps the memory until unmapped, as in CUDA.
	if err := vmm.MemRelease(m); err != nil {
		t.Fatal(err)
	}
	if err := vmm.MemRelease(m); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("double MemRelease = %v, want ErrInvalidValue", err)
	}
	if err := dev.CopyDtoH(out.Bytes()[:16], r+driver.Ptr(g), s); err != nil {
		t.Errorf("copy from memory of a released but mapped handle: %v", err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if st := h.Stats(); st.BytesAllocated != int64(2*g) {
		t.Errorf("BytesAllocated = %d while the released handle is mapped, want %d", st.BytesAllocated, 2*g)
	}
	if err := vmm.MemUnmap(r+driver.Ptr(g), 2*g); err != nil {
		t.Fatal(err)
	}
	// Only successful calls count: the refused ones above do not.
	if st := h.Stats(); st.MemCreates != 1 || st.MemMaps != 2 || st.SetAccesses != 1 || st.MemUnmaps != 1 {
		t.Errorf("VMM call counts %d/%d/%d/%d, want MemCreate 1, MemMap 2, SetAccess 1, MemUnmap 1",
			st.MemCreates, st.MemMaps, st.SetAccesses, st.MemUnmaps)
	}
	if free, total, _ := dev.MemInfo(); free != total {
		t.Errorf("after the last unmap of a released handle: %d free of %d", free, total)
	}
	if err := dev.CopyDtoH(out.Bytes()[:16], r+driver.Ptr(g), s); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("copy from an unmapped range = %v, want ErrInvalidValue", err)
	}
	if err := vmm.AddressFree(r, 4*g); err != nil {
		t.Fatal(err)
	}
	if err := vmm.AddressFree(r, 4*g); !errors.Is(err, driver.ErrInvalidPointer) {
		t.Errorf("double AddressFree = %v, want ErrInvalidPointer", err)
	}
}

func TestVMMUnmapBeforeQueuedCopy(t *testing.T) {
	drv := open(t, "capacity=64MiB,granularity=64KiB")
	dev, h := device(t, drv, 0)
	vmm := needVMM(t, dev)
	g := vmm.Granularity()
	r, _ := vmm.AddressReserve(g, 0)
	m, _ := vmm.MemCreate(g)
	if err := vmm.MemMap(r, g, 0, m); err != nil {
		t.Fatal(err)
	}
	if err := vmm.SetAccess(r, g); err != nil {
		t.Fatal(err)
	}
	s, _ := dev.NewStream()
	open, _ := h.Gate(s)
	if err := dev.Memset(r, 1, g, s); err != nil {
		t.Fatal(err)
	}
	if err := vmm.MemUnmap(r, g); err != nil {
		t.Fatal(err)
	}
	open()
	wantErr(t, "Memset queued before MemUnmap", s.Synchronize(), []error{driver.ErrInvalidValue}, "no longer valid")
}

func TestPeer(t *testing.T) {
	drv := open(t, "devices=2,capacity=64MiB")
	d0, _ := device(t, drv, 0)
	d1, _ := device(t, drv, 1)
	other := open(t, "")
	x, _ := device(t, other, 0)
	peer, ok := driver.AsPeer(d1)
	if !ok {
		t.Fatal("device 1 does not offer Peer")
	}
	for _, tt := range []struct {
		name string
		dev  driver.Device
		want bool
	}{{"other device", d0, true}, {"itself", d1, false}, {"another driver's device", x, false}} {
		if ok, err := peer.CanAccessPeer(tt.dev); ok != tt.want || err != nil {
			t.Errorf("CanAccessPeer(%s) = %v, %v; want %v", tt.name, ok, err, tt.want)
		}
	}
	if err := peer.EnablePeerAccess(x); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("EnablePeerAccess(another driver's device) = %v", err)
	}
	if err := peer.EnablePeerAccess(d0); err != nil {
		t.Fatal(err)
	}
	src := mustMalloc(t, d0, 4096)
	dst := mustMalloc(t, d1, 4096)
	if err := d0.CopyHtoDSync(src, bytes.Repeat([]byte{5}, 4096)); err != nil {
		t.Fatal(err)
	}
	s, _ := d1.NewStream()
	if err := peer.CopyPeer(dst, src, d0, 4096, s); err != nil {
		t.Fatal(err)
	}
	if err := peer.CopyPeer(dst, src+1, d0, 4096, s); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("CopyPeer past the source's end = %v", err)
	}
	if err := peer.CopyPeer(dst, src, d0, 16, d0.DefaultStream()); !errors.Is(err, driver.ErrInvalidValue) {
		t.Errorf("CopyPeer on the source device's stream = %v, want ErrInvalidValue", err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if err := d1.CopyDtoHSync(got, dst); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte{5}, 4096)) {
		t.Error("CopyPeer did not copy")
	}
	one := open(t, "peer=false,devices=2")
	p0, _ := device(t, one, 0)
	if _, ok := driver.AsPeer(p0); ok {
		t.Error("peer=false device offers Peer")
	}
}
