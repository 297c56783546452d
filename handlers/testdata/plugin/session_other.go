//go:build !unix

package main

import "os/exec"

func newSession(*exec.Cmd) {}
