//go:build !linux

package handlers

import (
	"os"
	"testing"
)

// terminal skips: the tests open pseudo-terminals on linux only.
func terminal(t *testing.T) *os.File {
	t.Skip("pseudo-terminals are opened on linux only")
	return nil
}
