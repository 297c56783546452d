//go:build unix

package handlers

import "syscall"

// openNonBlocking makes opening a named pipe return at once instead of
// waiting for a writer; regular files ignore it.
const openNonBlocking = syscall.O_NONBLOCK
