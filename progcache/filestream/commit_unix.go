//go:build !windows

package filestream

// renameRetrying renames once: a Unix rename replaces its target
// atomically whoever holds it open.
func renameRetrying(rename func() error) error { return rename() }
