package sim

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/accelkit/accelkit/driver"
)

// vmmAvailable is false: mapping one piece of physical memory into a
// reserved range at chosen addresses needs the placeholder API
// (VirtualAlloc2, MapViewOfFile3), which the sim does not implement, so
// the sim offers no driver.VMM on Windows.
const vmmAvailable = false

// mapDevice commits size bytes of device memory. Windows charges committed
// memory against the commit limit (RAM plus paging files) at once, but backs
// a page with RAM only when it is first touched.
func mapDevice(size uint64) (uint64, error) {
	p, err := windows.VirtualAlloc(0, uintptr(size), windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE)
	if err != nil {
		return 0, vaErr("device memory", size, err)
	}
	return uint64(p), nil
}

// mapHost commits size bytes of pinned host memory, pre-faulted by a write
// to every page and locked when the working-set quota allows. A refused
// VirtualLock is not an error: by default a process may lock little more
// than 200 KiB (its minimum working set), and the pages are resident
// already.
func mapHost(size uint64) (uint64, error) {
	p, err := windows.VirtualAlloc(0, uintptr(size), windows.MEM_RESERVE|windows.MEM_COMMIT, windows.PAGE_READWRITE)
	if err != nil {
		return 0, vaErr("pinned host memory", size, err)
	}
	prefault(uint64(p), size)
	_ = windows.VirtualLock(p, uintptr(size)) // best effort, as mlock elsewhere
	return uint64(p), nil
}

// unmap releases the allocation at p; MEM_RELEASE frees a whole VirtualAlloc
// region, so size only names it in errors.
func unmap(p, size uint64) error {
	if err := windows.VirtualFree(uintptr(p), 0, windows.MEM_RELEASE); err != nil {
		return fmt.Errorf("VirtualFree [%#x, %#x): %w", p, p+size, err)
	}
	return nil
}

// errNoVMM is what the VMM memory calls return on Windows. Device never
// reaches them: New refuses VMM here, and every VMM method checks the
// configuration first.
func errNoVMM(what string) error {
	return fmt.Errorf("%s: the sim offers no VMM on %s: %w", what, runtime.GOOS, driver.ErrNotSupported)
}

func reserveRange(size, align uint64) (uint64, error) { return 0, errNoVMM("address reservation") }

func mapFileFixed(p, size uint64, f *os.File, off uint64) error {
	return errNoVMM("physical memory mapping")
}

func unmapFixed(p, size uint64) error { return errNoVMM("reservation remap") }

func protectRW(p, size uint64) error { return errNoVMM("access change") }

func newPhysMem(size uint64) (*os.File, error) { return nil, errNoVMM("physical memory") }

// vaErr maps a failed VirtualAlloc: running out of commit or memory is
// ErrOutOfMemory, with what to do about it.
func vaErr(what string, size uint64, err error) error {
	if errors.Is(err, windows.ERROR_NOT_ENOUGH_MEMORY) || errors.Is(err, windows.ERROR_OUTOFMEMORY) ||
		errors.Is(err, windows.ERROR_COMMITMENT_LIMIT) {
		return fmt.Errorf("VirtualAlloc of %d bytes for %s: %w: memory or the commit limit (RAM plus paging files) is exhausted; free memory or enlarge the paging file: %w",
			size, what, err, driver.ErrOutOfMemory)
	}
	return fmt.Errorf("VirtualAlloc of %d bytes for %s: %w (%w)", size, what, err, driver.ErrInvalidValue)
}

// memoryStatusEx is MEMORYSTATUSEX, which x/sys/windows does not define.
type memoryStatusEx struct {
	length               uint32
	memoryLoad           uint32
	totalPhys            uint64
	availPhys            uint64
	totalPageFile        uint64
	availPageFile        uint64
	totalVirtual         uint64
	availVirtual         uint64
	availExtendedVirtual uint64
}

var procGlobalMemoryStatusEx = windows.NewLazySystemDLL("kernel32.dll").NewProc("GlobalMemoryStatusEx")

// totalRAM is the machine's physical memory in bytes, 0 if unknown: pinned
// (pre-faulted) allocations beyond it could only end in paging or failure.
func totalRAM() uint64 {
	if procGlobalMemoryStatusEx.Find() != nil {
		return 0
	}
	ms := memoryStatusEx{length: uint32(unsafe.Sizeof(memoryStatusEx{}))}
	if r, _, _ := procGlobalMemoryStatusEx.Call(uintptr(unsafe.Pointer(&ms))); r == 0 {
		return 0
	}
	return ms.totalPhys
}
