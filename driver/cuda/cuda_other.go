//go:build !(linux && cgo)

package cuda

import (
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

func init() {
	driver.Register("cuda", Open)
}

// EnvLibrary names the environment variable that points the backend at a
// libcuda other than "libcuda.so.1" (used only by cgo builds on Linux).
const EnvLibrary = "ACCELKIT_LIBCUDA"

// Open reports that this build has no CUDA backend: it needs cgo on Linux.
// The error wraps driver.ErrNotSupported, so driver.Open("auto", "") falls
// back to sim.
func Open(dsn string) (driver.Driver, error) {
	return nil, fmt.Errorf("cuda backend built without cgo; rebuild with CGO_ENABLED=1 on linux: %w", driver.ErrNotSupported)
}
