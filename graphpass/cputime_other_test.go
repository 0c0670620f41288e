//go:build !unix

package graphpass

import "time"

// processCPU is unavailable here; benchmarks then report 0.
func processCPU() time.Duration { return 0 }
