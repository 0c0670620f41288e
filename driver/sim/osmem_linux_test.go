package sim

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the pages of [p, p+size) in RAM (mincore, which x/sys
// does not wrap).
func resident(t *testing.T, p, size uint64) int {
	t.Helper()
	vec := make([]byte, (size+pageSize-1)/pageSize)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(p), uintptr(size), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestPrefault checks that prefault, the pre-faulting of macOS, FreeBSD and
// Windows, backs every page of fresh anonymous memory.
func TestPrefault(t *testing.T) {
	const pages = 64
	size := pages * pageSize
	p, err := mapDevice(size) // anonymous, not populated
	if err != nil {
		t.Fatal(err)
	}
	defer unmap(p, size)
	if n := resident(t, p, size); n != 0 {
		t.Fatalf("%d of %d pages resident before prefault; the test cannot tell", n, pages)
	}
	prefault(p, size)
	if n := resident(t, p, size); n != pages {
		t.Errorf("%d of %d pages resident after prefault", n, pages)
	}
}

// TestMapHostResident checks that pinned host memory is resident as soon as
// mapHost returns: by MAP_POPULATE, or with -tags simportable by prefault.
func TestMapHostResident(t *testing.T) {
	const pages = 64
	size := pages * pageSize
	p, err := mapHost(size)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap(p, size)
	if n := resident(t, p, size); n != pages {
		t.Errorf("%d of %d pages of mapHost memory resident (populate flag %#x)", n, pages, populate)
	}
}

// TestVMMBacking checks, in /proc/self/maps, that VMM memory mapped by a
// device is backed by the file this build should use: a memfd, or with
// -tags simportable an unlinked temporary file (the macOS and FreeBSD path).
func TestVMMBacking(t *testing.T) {
	drv, err := Open("capacity=64MiB,granularity=64KiB")
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	dev, _ := drv.Device(0)
	d := Hooks(dev)
	g := d.Granularity()
	r, err := d.AddressReserve(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.MemCreate(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.MemMap(r, g, 0, m); err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	prefix := strconv.FormatUint(uint64(r), 16) + "-"
	for line := range strings.Lines(string(maps)) {
		if strings.HasPrefix(line, prefix) {
			if !strings.Contains(line, wantBacking) || !strings.Contains(line, "(deleted)") {
				t.Errorf("mapping at %v: %q; want an unlinked %q", r, strings.TrimSpace(line), wantBacking)
			}
			return
		}
	}
	t.Errorf("no mapping starts at %v in /proc/self/maps", r)
}
