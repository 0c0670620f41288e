//go:build linux || darwin || freebsd

package sim

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/accelkit/accelkit/driver"
)

// vmmAvailable: physical memory can be mapped at fixed addresses here, so
// the sim offers driver.VMM.
const vmmAvailable = true

// mapDevice maps size bytes of device memory: anonymous, private and, where
// the OS has the flag, not reserved against swap, so a large capacity costs
// only what is touched.
func mapDevice(size uint64) (uint64, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|noReserve)
	if err != nil {
		return 0, mmapErr("device memory", size, err)
	}
	return uint64(uintptr(p)), nil
}

// mapHost maps size bytes of pinned host memory: pre-faulted (MAP_POPULATE
// on Linux, else a write to every page) and locked when the memlock limit
// allows. A refused mlock is not an error: the pages are resident already
// and CUDA's own pinned memory is not subject to RLIMIT_MEMLOCK either.
func mapHost(size uint64) (uint64, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|populate)
	if err != nil {
		return 0, mmapErr("pinned host memory", size, err)
	}
	addr := uint64(uintptr(p))
	_ = unix.Mlock(bytesAt(addr, size)) // best effort: EPERM, ENOMEM, EAGAIN are expected under RLIMIT_MEMLOCK
	if populate == 0 {
		prefault(addr, size)
	}
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
		unix.MAP_PRIVATE|unix.MAP_ANON|noReserve)
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

// mapFileFixed maps [off, off+size) of the physical memory f at p,
// replacing what is there, with no access until protect grants it.
func mapFileFixed(p, size uint64, f *os.File, off uint64) error {
	_, err := unix.MmapPtr(int(f.Fd()), int64(off), ptrAt(p), uintptr(size), unix.PROT_NONE,
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
		unix.MAP_PRIVATE|unix.MAP_ANON|noReserve|unix.MAP_FIXED)
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

// newFileMem creates size bytes of physical memory as an unlinked temporary
// file in os.TempDir: the portable stand-in for memfd_create, which only
// Linux has. The file is sparse, so only pages written cost memory (and, as
// the kernel writes dirty pages back, disk).
func newFileMem(size uint64) (*os.File, error) {
	f, err := os.CreateTemp("", "accelkit-sim-vmm-*")
	if err != nil {
		return nil, fileMemErr(size, err)
	}
	// Unlinked at once: the memory lives as long as f and its mappings, and
	// nothing is left behind if the process dies.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fileMemErr(size, err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fileMemErr(size, err)
	}
	return f, nil
}

// fileMemErr maps a failure to create a VMM backing file: running out of
// files or space is ErrOutOfMemory, anything else (an unwritable TMPDIR)
// ErrInvalidValue, with the directory named.
func fileMemErr(size uint64, err error) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.EFBIG) {
		return fmt.Errorf("VMM backing file of %d bytes in %s: %w: the disk, the file size or the open-file limit is exhausted: %w",
			size, os.TempDir(), err, driver.ErrOutOfMemory)
	}
	return fmt.Errorf("VMM backing file of %d bytes in %s: %w; set TMPDIR to a writable directory (%w)",
		size, os.TempDir(), err, driver.ErrInvalidValue)
}

// mmapErr maps a failed mmap-family call. ENOMEM is usually a limit on the
// address space or on mappings per process (each allocation is one
// mapping), so the error says which limits there are and how to raise them.
func mmapErr(what string, size uint64, err error) error {
	if errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
		return fmt.Errorf("mmap of %d bytes for %s: %w: %s: %w",
			size, what, err, exhaustedHint(), driver.ErrOutOfMemory)
	}
	return fmt.Errorf("mmap of %d bytes for %s: %w (%w)", size, what, err, driver.ErrInvalidValue)
}
