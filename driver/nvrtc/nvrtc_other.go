//go:build !(linux && cgo)

package nvrtc

import (
	"context"
	"fmt"

	"github.com/accelkit/accelkit/driver"
)

// lib has nothing to load in this build.
type lib struct{}

// Open reports that this build cannot load NVRTC: it needs cgo on Linux.
// The error wraps driver.ErrNotSupported.
func Open(path string) (*Compiler, error) { return nil, errNoCgo }

var errNoCgo = fmt.Errorf("nvrtc: built without cgo; rebuild with CGO_ENABLED=1 on linux to load NVRTC: %w", driver.ErrNotSupported)

func (*lib) compile(context.Context, []byte, string, arch, Options) (*Result, error) {
	return nil, errNoCgo
}
