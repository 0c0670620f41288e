package drivertest

// The memory rules: Malloc and Free with the device's capacity, HostAlloc
// and HostFree, the asynchronous and synchronous copies and Memset that
// move data, and ErrNotPinned for asynchronous copies outside a live
// HostBuffer.

import (
	"bytes"
	"testing"

	"github.com/accelkit/accelkit/driver"
)

func testAlloc(t *testing.T, e *env) {
	d := e.dev
	free0, total, err := d.MemInfo()
	must(t, "MemInfo succeeds", err)
	if total == 0 || free0 > total {
		t.Fatalf("rule: MemInfo reports 0 < total and free <= total; got free %d, total %d", free0, total)
	}
	p, err := d.Malloc(0)
	if p != 0 || err != nil {
		t.Errorf("rule: Malloc(0) returns (0, nil); got (%v, %v)", p, err)
	}
	must(t, "Free(0) is a no-op", d.Free(0))

	const n = 8 << 20
	a := e.malloc(t, n)
	b := e.malloc(t, 1)
	if a == b || (b >= a && b < a+n) {
		t.Errorf("rule: live allocations do not overlap; got %v (8 MiB) and %v", a, b)
	}
	free1, total1, err := d.MemInfo()
	must(t, "MemInfo succeeds", err)
	if total1 != total || free1 > free0 {
		t.Errorf("rule: MemInfo total is constant and free does not grow by allocating; before %d/%d, after %d/%d", free0, total, free1, total1)
	}

	c, err := d.Malloc(4096)
	must(t, "Malloc succeeds", err)
	must(t, "Free of a live allocation succeeds", d.Free(c))
	mustIs(t, "a double Free is ErrInvalidPointer", d.Free(c), driver.ErrInvalidPointer)

	_, err = d.Malloc(total * 4)
	mustIs(t, "Malloc beyond the device's memory is ErrOutOfMemory", err, driver.ErrOutOfMemory)
	_, err = d.Malloc(1 << 62)
	mustIs(t, "Malloc of an absurd size is ErrOutOfMemory", err, driver.ErrOutOfMemory)
	// The device still works after refusing.
	must(t, "the device works after an OOM", d.Free(e.malloc(t, 4096)))
}

func testHostAlloc(t *testing.T, e *env) {
	d := e.dev
	z, err := d.HostAlloc(0)
	must(t, "HostAlloc(0) succeeds", err)
	if z == nil || z.Len() != 0 {
		t.Fatal("rule: HostAlloc(0) returns an empty buffer")
	}
	must(t, "HostFree of an empty buffer succeeds", d.HostFree(z))

	b, err := d.HostAlloc(3 * 4096)
	must(t, "HostAlloc succeeds", err)
	if b.Len() != 3*4096 {
		t.Fatalf("rule: HostAlloc(n) has n bytes; got %d", b.Len())
	}
	if b.Device() != d {
		t.Error("rule: HostBuffer.Device is the device that allocated it")
	}
	pattern(b.Bytes(), 1) // writable all through
	must(t, "HostFree of a live buffer succeeds", d.HostFree(b))
	mustIs(t, "a double HostFree is ErrInvalidPointer", d.HostFree(b), driver.ErrInvalidPointer)
	if _, err := d.HostAlloc(-1); err == nil {
		t.Error("rule: HostAlloc of a negative size is an error")
	}
}

func testCopy(t *testing.T, e *env) {
	d := e.dev
	s := e.stream(t)
	src := e.host(t, copySize)
	dst := e.host(t, copySize)
	pattern(src.Bytes(), 7)
	a := e.malloc(t, copySize)
	b := e.malloc(t, copySize)
	must(t, "CopyHtoD from a HostBuffer is accepted", d.CopyHtoD(a, src.Bytes(), s))
	must(t, "CopyDtoD is accepted", d.CopyDtoD(b, a, copySize, s))
	must(t, "Memset is accepted", d.Memset(b+100, 0xab, 50, s))
	must(t, "CopyDtoH into a HostBuffer is accepted", d.CopyDtoH(dst.Bytes(), b, s))
	// Zero-length work is valid and does nothing.
	must(t, "a zero-length CopyHtoD is accepted", d.CopyHtoD(a, src.Bytes()[:0], s))
	must(t, "a zero-length Memset is accepted", d.Memset(a, 0, 0, s))
	must(t, "Stream.Synchronize after good work returns nil", s.Synchronize())
	want := bytes.Clone(src.Bytes())
	for i := 100; i < 150; i++ {
		want[i] = 0xab
	}
	if !bytes.Equal(dst.Bytes(), want) {
		t.Fatal("rule: HtoD, DtoD, Memset and DtoH on one stream round-trip the data")
	}
	// Sub-slices and device offsets.
	must(t, "CopyHtoD from a sub-slice of a HostBuffer is accepted", d.CopyHtoD(a+1000, src.Bytes()[5:505], s))
	must(t, "CopyDtoH into a sub-slice is accepted", d.CopyDtoH(dst.Bytes()[7:507], a+1000, s))
	must(t, "Stream.Synchronize returns nil", s.Synchronize())
	if !bytes.Equal(dst.Bytes()[7:507], src.Bytes()[5:505]) {
		t.Error("rule: copies at offsets move exactly the bytes named")
	}
	must(t, "Memset on the default stream is accepted", d.Memset(a, 1, copySize, d.DefaultStream()))
	must(t, "default stream Synchronize", d.DefaultStream().Synchronize())
}

func testSyncCopy(t *testing.T, e *env) {
	d := e.dev
	a := e.malloc(t, copySize)
	src := make([]byte, copySize) // pageable Go memory is fine for sync copies
	pattern(src, 3)
	must(t, "CopyHtoDSync accepts Go memory", d.CopyHtoDSync(a, src))
	got := make([]byte, copySize)
	must(t, "CopyDtoHSync accepts Go memory", d.CopyDtoHSync(got, a))
	if !bytes.Equal(got, src) {
		t.Fatal("rule: sync copies round-trip the data")
	}
	// Sync copies wait for the default stream.
	must(t, "Memset on the default stream", d.Memset(a, 0x5a, copySize, d.DefaultStream()))
	must(t, "CopyDtoHSync", d.CopyDtoHSync(got, a))
	if !bytes.Equal(got, bytes.Repeat([]byte{0x5a}, copySize)) {
		t.Error("rule: a sync copy waits for the work queued on the default stream")
	}
	must(t, "zero-length sync copies are accepted", d.CopyHtoDSync(a, nil))
}

func testNotPinned(t *testing.T, e *env) {
	d := e.dev
	s := e.stream(t)
	p := e.malloc(t, 4096)
	goMem := make([]byte, 4096)
	mustIs(t, "CopyHtoD from Go memory is ErrNotPinned", d.CopyHtoD(p, goMem, s), driver.ErrNotPinned)
	mustIs(t, "CopyDtoH into Go memory is ErrNotPinned", d.CopyDtoH(goMem, p, s), driver.ErrNotPinned)
	b, err := d.HostAlloc(4096)
	must(t, "HostAlloc", err)
	must(t, "CopyHtoD from a live HostBuffer", d.CopyHtoD(p, b.Bytes(), s))
	must(t, "Synchronize", s.Synchronize())
	must(t, "HostFree", d.HostFree(b))
	mustIs(t, "CopyHtoD from a freed HostBuffer is ErrNotPinned", d.CopyHtoD(p, b.Bytes(), s), driver.ErrNotPinned)
	must(t, "refused copies leave no sticky error", s.Synchronize())
}
