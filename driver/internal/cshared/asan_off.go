//go:build linux && cgo && !asan

package cshared

// ASanFlags: none without go test -asan (asan_on.go).
var ASanFlags []string
