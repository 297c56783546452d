//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// newSession starts cmd in a session of its own, out of the plugin's
// process group.
func newSession(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }
