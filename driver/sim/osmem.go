package sim

import (
	"os"
	"unsafe"
)

// The OS memory layer, by file:
//
//	osmem.go          every OS: page arithmetic, address views, prefault
//	osmem_unix.go     Linux, macOS, FreeBSD: mmap, munmap, mprotect, mlock
//	osmem_linux.go    Linux: MAP_NORESERVE, sysinfo, vm.max_map_count
//	osmem_bsd.go      macOS, FreeBSD: sysctl for the RAM size
//	physmem_memfd.go  Linux: VMM memory is a memfd, host memory MAP_POPULATE
//	physmem_file.go   macOS, FreeBSD, and Linux with -tags simportable: VMM
//	                  memory is an unlinked temporary file, host memory is
//	                  pre-faulted by touching each page
//	osmem_windows.go  Windows: VirtualAlloc, no VMM

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

// prefault writes a zero into every page of [p, p+size), fresh zeroed
// memory, so that the OS backs each page now rather than at the first copy:
// what MAP_POPULATE does where the OS has it. A write is needed; a read may
// only map a shared zero page.
func prefault(p, size uint64) {
	b := bytesAt(p, size)
	for i := uint64(0); i < size; i += pageSize {
		b[i] = 0
	}
}
