//go:build !((linux || darwin) && (amd64 || arm64))

package inspect

import (
	"fmt"
	"runtime"
)

// supported is false: the layouts in layout.go are those of 64-bit
// little-endian targets, and purego's dlopen without cgo is used on linux
// and darwin only.
const supported = false

func childInspect(req request, w *childWriter) childResult {
	return childResult{DlopenError: fmt.Sprintf("inspect: loading plugins is not supported on %s/%s", runtime.GOOS, runtime.GOARCH)}
}
