//go:build unix

package graphpass

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used.
// Benchmarks report it beside wall time because the development machine is
// shared: wall time there measures the neighbours as much as the code.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
