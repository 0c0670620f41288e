package redistest

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server if the test process dies
// first (a panic, a test timeout), so no server outlives its test.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
