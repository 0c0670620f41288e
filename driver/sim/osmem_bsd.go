//go:build darwin || freebsd

package sim

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// noReserve is 0: FreeBSD has no MAP_NORESERVE, and macOS ignores it;
// both reserve anonymous memory lazily anyway.
const noReserve = 0

// exhaustedHint names the limits an ENOMEM from mmap may have hit; neither
// OS has a tunable like Linux's vm.max_map_count.
func exhaustedHint() string {
	return "the address space, memory or the open-file limit is exhausted; free memory or raise the open-file limit (ulimit -n)"
}

// totalRAM is the machine's physical memory in bytes, 0 if unknown: pinned
// (pre-faulted) allocations beyond it could only end in swapping or the
// kernel killing the process.
func totalRAM() uint64 {
	name := "hw.physmem" // FreeBSD
	if runtime.GOOS == "darwin" {
		name = "hw.memsize"
	}
	n, err := unix.SysctlUint64(name)
	if err != nil {
		return 0
	}
	return n
}
