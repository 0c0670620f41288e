//go:build !cgo

// Without cgo there is no C library to build: the package exists so that
// CGO_ENABLED=0 builds of the whole workspace (go build ./...) succeed, and
// running it says what to do.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "accelkit_alloc is a C shared library for PyTorch and CuPy: build it with cgo: CGO_ENABLED=1 go build -buildmode=c-shared -o libaccelkit_alloc.so github.com/accelkit/accelkit/devalloc/capi/cmd/accelkit_alloc")
	os.Exit(2)
}
