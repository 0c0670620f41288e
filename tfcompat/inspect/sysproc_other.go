//go:build !unix

package inspect

import (
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

func signalOf(*os.ProcessState) string { return "" }
