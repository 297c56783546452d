//go:build !unix

package handlers

import (
	"fmt"
	"os/exec"
)

// killGroupOnCancel keeps exec.CommandContext's default: the plugin alone
// is killed.
func killGroupOnCancel(*exec.Cmd) {}

// exitStatus says how the plugin ended: its exit code.
func exitStatus(e *exec.ExitError) string {
	return fmt.Sprintf("exited with code %d", e.ExitCode())
}
