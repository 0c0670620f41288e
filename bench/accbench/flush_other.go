//go:build !unix

package accbench

// flushDirty has nothing to do where sync(2) is missing.
func flushDirty() {}
