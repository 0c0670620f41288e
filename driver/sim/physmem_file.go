//go:build darwin || freebsd || (linux && simportable)

package sim

import "os"

// populate is 0: MAP_POPULATE is Linux's; mapHost pre-faults by writing to
// every page instead.
const populate = 0

// newPhysMem creates size bytes of physical memory for a VMM handle. There
// is no memfd_create here (or the simportable tag asked for the portable
// path on Linux), so it is an unlinked temporary file.
func newPhysMem(size uint64) (*os.File, error) { return newFileMem(size) }
