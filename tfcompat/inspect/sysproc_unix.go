//go:build unix

package inspect

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup puts the child in a process group of its own and makes
// cancellation kill the whole group, so a plugin's own helper processes
// die with a hung child.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
}

// signalOf names the signal that ended the child, if one did.
func signalOf(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}
