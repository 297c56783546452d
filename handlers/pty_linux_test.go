package handlers

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

// terminal opens a pseudo-terminal and returns its follower end, a file
// that term.IsTerminal takes for a terminal. Linux machines have
// /dev/ptmx: a test that cannot open one fails rather than skips, so that a
// skip never passes for a test that ran.
func terminal(t *testing.T) *os.File {
	t.Helper()
	leader, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { leader.Close() })
	var n, unlock uint32
	if err := ioctl(leader, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatalf("no pseudo-terminal: unlock: %v", err)
	}
	if err := ioctl(leader, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatalf("no pseudo-terminal: number: %v", err)
	}
	follower, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { follower.Close() })
	return follower
}

func ioctl(f *os.File, req uint, arg unsafe.Pointer) error {
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}
