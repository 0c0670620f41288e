//go:build linux && cgo && asan

package fakecuda

// sanitizeFlags build the fake with AddressSanitizer when the test binary
// has it (go test -asan), so that the fake's own accesses to the memory it
// serves are checked too; the binary's ASan runtime serves the library.
var sanitizeFlags = []string{"-fsanitize=address", "-fno-omit-frame-pointer", "-g"}
