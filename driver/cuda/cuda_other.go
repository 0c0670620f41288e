//go:build !(linux && cgo)

package cuda

import (
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

func init() {
	driver.RegisterBackend(driver.Backend{Name: "cuda", Open: Open, Probe: probe, Preference: driver.PreferHardware})
}

// EnvLibrary names the environment variable that points the backend at a
// libcuda other than "libcuda.so.1" (used only by cgo builds on Linux).
const EnvLibrary = "ACCELKIT_LIBCUDA"

// Open reports that this build has no CUDA backend: it needs cgo on Linux.
// The error wraps driver.ErrNotSupported.
func Open(dsn string) (driver.Driver, error) { return nil, errNoCgo }

// probe reports the same, so driver.Open("auto", "") passes over cuda
// (to sim, when registered) and names the reason.
func probe(dsn string) error { return errNoCgo }

// RawLaunchLoop reports that this build has no CUDA backend; with cgo on
// Linux it launches k n times in one C loop, the baseline benchmarks set
// beside Kernel.Launch. The error wraps driver.ErrNotSupported.
func RawLaunchLoop(k driver.Kernel, s driver.Stream, cfg driver.LaunchConfig, args *driver.Args, n int) error {
	return errNoCgo
}

var errNoCgo = fmt.Errorf("cuda backend built without cgo; rebuild with CGO_ENABLED=1 on linux: %w", driver.ErrNotSupported)
