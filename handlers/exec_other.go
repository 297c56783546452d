//go:build !unix

package handlers

import "os/exec"

// killGroupOnCancel keeps exec.CommandContext's default: the plugin alone
// is killed.
func killGroupOnCancel(*exec.Cmd) {}
