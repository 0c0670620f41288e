package sim

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/accelkit/accelkit/driver"
)

// pageSize is the OS page; mappings and capacity charges round up to it,
// since that is what the kernel charges for an anonymous mapping.
var pageSize = uint64(os.Getpagesize())

func roundUp(n, m uint64) uint64 { return (n + m - 1) / m * m }

// ptrAt converts an address outside the Go heap (mmap'ed memory) to a
// pointer. The indirection keeps vet's unsafeptr check quiet: the memory is
// not the garbage collector's, so no Go object can move or die under it.
func ptrAt(p uint64) unsafe.Pointer {
	a := uintptr(p)
	return *(*unsafe.Pointer)(unsafe.Pointer(&a))
}

// bytesAt views n bytes at address p as a slice (memory outside the Go heap).
func bytesAt(p uint64, n uint64) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(ptrAt(p)), int(n))
}

// mapDevice maps size bytes of device memory: anonymous, private and not
// reserved against swap, so a large capacity costs only what is touched.
func mapDevice(size uint64) (uint64, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return 0, mmapErr("device memory", size, err)
	}
	return uint64(uintptr(p)), nil
}

// mapHost maps size bytes of pinned host memory: pre-faulted
// (MAP_POPULATE) and locked when the memlock limit allows. A refused mlock is
// not an error: the pages are resident already and CUDA's own pinned memory
// is not subject to RLIMIT_MEMLOCK either.
func mapHost(size uint64) (uint64, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return 0, mmapErr("pinned host memory", size, err)
	}
	addr := uint64(uintptr(p))
	_ = unix.Mlock(bytesAt(addr, size)) // best effort: EPERM, ENOMEM, EAGAIN are expected under RLIMIT_MEMLOCK
	return addr, nil
}

// reserveRange maps size bytes of inaccessible address space aligned to
// align (a power of two), trimming the over-allocation around it.
func reserveRange(size, align uint64) (uint64, error) {
	span := size + align - pageSize
	if align <= pageSize {
		span = size
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(span), unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return 0, mmapErr("address reservation", size, err)
	}
	start := uint64(uintptr(p))
	base := roundUp(start, max(align, pageSize))
	if head := base - start; head > 0 {
		_ = unix.MunmapPtr(ptrAt(start), uintptr(head))
	}
	if tail := start + span - (base + size); tail > 0 {
		_ = unix.MunmapPtr(ptrAt(base+size), uintptr(tail))
	}
	return base, nil
}

// unmap releases [p, p+size).
func unmap(p, size uint64) error {
	if err := unix.MunmapPtr(ptrAt(p), uintptr(size)); err != nil {
		return fmt.Errorf("munmap [%#x, %#x): %w", p, p+size, err)
	}
	return nil
}

// mapFileFixed maps [off, off+size) of fd at p, replacing what is there, with
// no access until protect grants it.
func mapFileFixed(p, size uint64, fd int, off uint64) error {
	_, err := unix.MmapPtr(fd, int64(off), ptrAt(p), uintptr(size), unix.PROT_NONE,
		unix.MAP_SHARED|unix.MAP_FIXED)
	if err != nil {
		return mmapErr("physical memory mapping", size, err)
	}
	return nil
}

// unmapFixed puts inaccessible anonymous memory back over [p, p+size), so
// the range stays reserved.
func unmapFixed(p, size uint64) error {
	_, err := unix.MmapPtr(-1, 0, ptrAt(p), uintptr(size), unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE|unix.MAP_FIXED)
	if err != nil {
		return mmapErr("reservation remap", size, err)
	}
	return nil
}

// protectRW makes [p, p+size) readable and writable.
func protectRW(p, size uint64) error {
	if err := unix.Mprotect(bytesAt(p, size), unix.PROT_READ|unix.PROT_WRITE); err != nil {
		return fmt.Errorf("mprotect [%#x, %#x): %w", p, p+size, err)
	}
	return nil
}

// newMemfd creates an anonymous file of size bytes: the physical memory of a
// VMM handle, which can be mapped at several addresses.
func newMemfd(size uint64) (int, error) {
	fd, err := unix.MemfdCreate("accelkit-sim", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, mmapErr("memfd_create", size, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, mmapErr("memfd ftruncate", size, err)
	}
	return fd, nil
}

// mmapErr maps a failed mmap-family call. ENOMEM is usually the kernel's
// limit on mappings per process (each allocation is one mapping), so the
// error names it and its current value.
func mmapErr(what string, size uint64, err error) error {
	if errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
		limit := "unknown"
		if b, rerr := os.ReadFile("/proc/sys/vm/max_map_count"); rerr == nil {
			limit = strings.TrimSpace(string(b))
		}
		return fmt.Errorf("mmap of %d bytes for %s: %w: the address space, the mapping count limit vm.max_map_count (now %s) or the file limit is exhausted; free memory or raise vm.max_map_count: %w",
			size, what, err, limit, driver.ErrOutOfMemory)
	}
	return fmt.Errorf("mmap of %d bytes for %s: %w (%w)", size, what, err, driver.ErrInvalidValue)
}

// totalRAM is the machine's physical memory in bytes, 0 if unknown: pinned
// (pre-faulted) allocations beyond it could only end in the OOM killer.
func totalRAM() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
