//go:build linux && cgo && asan

package cshared

// ASanFlags build a library with AddressSanitizer when the test binary has
// it (go test -asan), so that the library's own accesses are checked too;
// the binary's ASan runtime serves the library. Only for a library loaded
// in this process: another process that loads it needs the ASan runtime.
var ASanFlags = []string{"-fsanitize=address", "-fno-omit-frame-pointer", "-g"}
