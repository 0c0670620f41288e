//go:build linux && !simportable

package sim

import (
	"os"

	"golang.org/x/sys/unix"
)

// populate pre-faults pinned host memory in the mmap call itself.
const populate = unix.MAP_POPULATE

// newPhysMem creates size bytes of physical memory for a VMM handle: a
// memfd, which can be mapped at several addresses and lives in RAM (or
// swap), never on disk.
func newPhysMem(size uint64) (*os.File, error) {
	fd, err := unix.MemfdCreate("accelkit-sim", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, mmapErr("memfd_create", size, err)
	}
	f := os.NewFile(uintptr(fd), "memfd:accelkit-sim")
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, mmapErr("memfd ftruncate", size, err)
	}
	return f, nil
}
