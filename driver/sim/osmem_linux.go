package sim

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// noReserve keeps large anonymous mappings from being charged against swap.
const noReserve = unix.MAP_NORESERVE

// exhaustedHint names the limits an ENOMEM from mmap may have hit, with the
// current vm.max_map_count.
func exhaustedHint() string {
	limit := "unknown"
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		limit = strings.TrimSpace(string(b))
	}
	return "the address space, the mapping count limit vm.max_map_count (now " + limit +
		") or the file limit is exhausted; free memory or raise vm.max_map_count"
}

// totalRAM is the machine's physical memory in bytes, 0 if unknown: pinned
// (pre-faulted) allocations beyond it could only end in the OOM killer.
func totalRAM() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit) //nolint:unconvert // Totalram is uint32 on 32-bit Linux (386, arm, mips)
}
