//go:build unix

package handlers

import (
	"fmt"
	"os/exec"
	"syscall"
)

// killGroupOnCancel starts the plugin in a process group of its own and
// makes a cancellation kill the whole group: a plugin's children (a shell
// script's commands, a helper it started) die with it.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// exitStatus says how the plugin ended: its exit code, or the signal that
// killed it.
func exitStatus(e *exec.ExitError) string {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "was killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exited with code %d", e.ExitCode())
}
