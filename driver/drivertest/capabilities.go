package drivertest

// The optional capabilities, checked when the device offers them: VMM
// (reserve, create, map, access, unmap, release) and Peer (access and
// copies between two devices of one driver).

import (
	"bytes"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

func testVMM(t *testing.T, e *env) {
	d := e.dev
	v, ok := driver.AsVMM(d)
	if !ok {
		t.Skipf("%s device offers no VMM", e.drv.Name())
	}
	g := v.Granularity()
	if g == 0 || g&(g-1) != 0 {
		t.Fatalf("rule: VMM.Granularity is a power of two; got %d", g)
	}
	_, err := v.AddressReserve(g+1, 0)
	mustIs(t, "AddressReserve of a size that is not a granularity multiple is ErrInvalidValue", err, driver.ErrInvalidValue)
	_, err = v.MemCreate(g / 2)
	mustIs(t, "MemCreate of a size that is not a granularity multiple is ErrInvalidValue", err, driver.ErrInvalidValue)

	r, err := v.AddressReserve(4*g, 0)
	must(t, "AddressReserve", err)
	if uint64(r)%g != 0 {
		t.Errorf("rule: AddressReserve returns a granularity-aligned address; got %v", r)
	}
	h, err := v.MemCreate(2 * g)
	must(t, "MemCreate", err)
	must(t, "MemMap", v.MemMap(r, 2*g, 0, h))
	must(t, "SetAccess", v.SetAccess(r, 2*g))
	mustIs(t, "MemMap with a misaligned offset is ErrInvalidValue", v.MemMap(r+driver.Ptr(2*g), g, 1, h), driver.ErrInvalidValue)

	s := e.stream(t)
	n := int(min(2*g, 4<<20))
	src := e.host(t, n)
	out := e.host(t, n)
	pattern(src.Bytes(), 77)
	must(t, "CopyHtoD into mapped VMM memory", d.CopyHtoD(r+driver.Ptr(2*g)-driver.Ptr(n), src.Bytes(), s))
	must(t, "CopyDtoH from mapped VMM memory", d.CopyDtoH(out.Bytes(), r+driver.Ptr(2*g)-driver.Ptr(n), s))
	must(t, "Synchronize", s.Synchronize())
	if !bytes.Equal(out.Bytes(), src.Bytes()) {
		t.Error("rule: mapped VMM memory with access round-trips data")
	}
	// A second mapping of the same handle's memory in the next granules
	// sees the same bytes: it is the same physical memory.
	must(t, "MemMap of the same handle at a second address", v.MemMap(r+driver.Ptr(2*g), 2*g, 0, h))
	must(t, "SetAccess", v.SetAccess(r+driver.Ptr(2*g), 2*g))
	must(t, "CopyDtoH from the second mapping", d.CopyDtoH(out.Bytes(), r+driver.Ptr(4*g)-driver.Ptr(n), s))
	must(t, "Synchronize", s.Synchronize())
	if !bytes.Equal(out.Bytes(), src.Bytes()) {
		t.Error("rule: two mappings of one handle show the same physical memory")
	}
	must(t, "MemUnmap", v.MemUnmap(r+driver.Ptr(2*g), 2*g))
	must(t, "MemRelease of a mapped handle succeeds", v.MemRelease(h))
	must(t, "CopyDtoH from memory of a released handle that is still mapped", d.CopyDtoH(out.Bytes(), r+driver.Ptr(2*g)-driver.Ptr(n), s))
	must(t, "Synchronize", s.Synchronize())
	if !bytes.Equal(out.Bytes(), src.Bytes()) {
		t.Error("rule: memory of a released handle stays until its last unmap")
	}
	must(t, "MemUnmap", v.MemUnmap(r, 2*g))
	// Allocators map page by page and unmap runs of pages at once: one
	// MemUnmap may span several mappings (each covered whole).
	h1, err := v.MemCreate(g)
	must(t, "MemCreate", err)
	h2, err := v.MemCreate(g)
	must(t, "MemCreate", err)
	must(t, "MemMap", v.MemMap(r+driver.Ptr(g), g, 0, h1))
	must(t, "MemMap", v.MemMap(r+driver.Ptr(2*g), g, 0, h2))
	must(t, "SetAccess over two mappings", v.SetAccess(r+driver.Ptr(g), 2*g))
	m := int(min(g, 4<<20))
	must(t, "CopyHtoD across the two mappings", d.CopyHtoD(r+driver.Ptr(2*g)-driver.Ptr(m/2), src.Bytes()[:m], s))
	must(t, "CopyDtoH across the two mappings", d.CopyDtoH(out.Bytes()[:m], r+driver.Ptr(2*g)-driver.Ptr(m/2), s))
	must(t, "Synchronize", s.Synchronize())
	if !bytes.Equal(out.Bytes()[:m], src.Bytes()[:m]) {
		t.Error("rule: adjacent mappings of two handles read back as one range")
	}
	must(t, "MemRelease", v.MemRelease(h1))
	must(t, "MemRelease", v.MemRelease(h2))
	must(t, "MemUnmap of a range spanning two mappings", v.MemUnmap(r+driver.Ptr(g), 2*g))
	must(t, "AddressFree", v.AddressFree(r, 4*g))
}

func testPeer(t *testing.T, e *env) {
	d := e.dev
	if _, ok := driver.AsPeer(d); !ok {
		t.Skipf("%s device offers no Peer", e.drv.Name())
	}
	if e.drv.DeviceCount() < 2 {
		t.Skipf("%s driver has one device; peer access needs two", e.drv.Name())
	}
	d1, err := e.drv.Device(1)
	must(t, "Device(1)", err)
	p1, ok := driver.AsPeer(d1)
	if !ok {
		t.Fatal("rule: every device of a driver offers the same capabilities")
	}
	can, err := p1.CanAccessPeer(d)
	must(t, "CanAccessPeer", err)
	if !can {
		t.Skip("device 1 cannot access device 0")
	}
	must(t, "EnablePeerAccess", p1.EnablePeerAccess(d))
	src := e.malloc(t, copySize)
	data := make([]byte, copySize)
	pattern(data, 99)
	must(t, "CopyHtoDSync", d.CopyHtoDSync(src, data))
	dst, err := d1.Malloc(copySize)
	must(t, "Malloc on device 1", err)
	defer func() {
		if err := d1.Free(dst); err != nil {
			t.Errorf("rule: Free of a live allocation on device 1 succeeds: %v", err)
		}
	}()
	s, err := d1.NewStream()
	must(t, "NewStream on device 1", err)
	defer func() {
		if err := s.Destroy(); err != nil {
			t.Errorf("rule: Stream.Destroy on device 1 succeeds: %v", err)
		}
	}()
	must(t, "CopyPeer", p1.CopyPeer(dst, src, d, copySize, s))
	must(t, "Synchronize", s.Synchronize())
	got := make([]byte, copySize)
	must(t, "CopyDtoHSync on device 1", d1.CopyDtoHSync(got, dst))
	if !bytes.Equal(got, data) {
		t.Error("rule: CopyPeer copies from the peer device's memory")
	}
	must(t, "Memset with a nil stream on device 0", d.Memset(src, 0x3c, copySize, nil))
	must(t, "default stream Synchronize on device 0", d.DefaultStream().Synchronize())
	must(t, "CopyPeer with a nil stream is accepted (the copying device's default stream)", p1.CopyPeer(dst, src, d, copySize, nil))
	must(t, "CopyDtoHSync on device 1", d1.CopyDtoHSync(got, dst))
	if !bytes.Equal(got, bytes.Repeat([]byte{0x3c}, copySize)) {
		t.Error("rule: CopyPeer with a nil stream runs on the copying device's default stream, which sync copies wait for")
	}
}
