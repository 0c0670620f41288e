//go:build linux && cgo && !asan

package fakecuda

// sanitizeFlags: none without go test -asan (sanitize_asan.go).
var sanitizeFlags []string
