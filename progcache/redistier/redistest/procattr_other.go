//go:build !linux

package redistest

import "os/exec"

// setProcAttr does nothing here: only Linux can tie a child's life to its
// parent's, so elsewhere a server outlives a test process killed before
// its cleanup ran.
func setProcAttr(*exec.Cmd) {}
