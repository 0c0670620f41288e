//go:build !(linux && cgo)

package cuda

import "github.com/accelkit/accelkit/driver"

// ForeignStream reports that this build has no CUDA backend; the error
// wraps driver.ErrNotSupported.
func ForeignStream(dev driver.Device, h uintptr) (driver.Stream, error) { return nil, errNoCgo }

// IsForeign reports false: this build makes no foreign streams.
func IsForeign(s driver.Stream) bool { return false }
