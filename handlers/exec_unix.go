//go:build unix

package handlers

import (
	"fmt"
	"os/exec"
	"syscall"
)

// ownGroup starts the plugin in a process group of its own and makes a
// cancellation kill the whole group: a plugin's children (a shell script's
// commands, a helper it started) die with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// endGroup kills what is left of the plugin's process group once the plugin
// has exited: a child it left behind would hold its output open and run on.
// The group's id is the plugin's pid, which the kernel does not hand out
// again while the group has a member; an empty group gives ESRCH, which is
// fine, as is EPERM (a member that changed its user: nothing more to do).
func endGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
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
