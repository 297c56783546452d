//go:build !unix

package handlers

import (
	"fmt"
	"os/exec"
)

// ownGroup keeps exec.CommandContext's default: the plugin alone is killed.
func ownGroup(*exec.Cmd) {}

// endGroup has no group to end: the plugin's children are its own.
func endGroup(*exec.Cmd) {}

// exitStatus says how the plugin ended: its exit code.
func exitStatus(e *exec.ExitError) string {
	return fmt.Sprintf("exited with code %d", e.ExitCode())
}
