// Package peers gives the cloud modules' tests the binaries of the peers
// (aws-iam-authenticator, kubelogin) that hack/peers.sh builds, and what
// their benchmarks measure of the processes they run.
package peers

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Binary is the path of the peer's binary name (aws-iam-authenticator,
// kubelogin) in AUTHVAULT_PEERS, the directory hack/peers.sh prints. A test that needs
// it fails without it, rather than skip: a skipped test proves nothing.
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	dir := os.Getenv("AUTHVAULT_PEERS")
	if dir == "" {
		tb.Fatalf("AUTHVAULT_PEERS is not set: it names the directory of the peers' binaries, which " +
			"`bash hack/peers.sh` (or `make peers`) builds once, caches and prints; run " +
			"AUTHVAULT_PEERS=$(bash hack/peers.sh) go test ..., as make test does")
	}
	path := filepath.Join(dir, name)
	if fi, err := os.Stat(path); err != nil || fi.Mode()&0o111 == 0 {
		tb.Fatalf("AUTHVAULT_PEERS=%s has no executable %s (%v): run bash hack/peers.sh and set AUTHVAULT_PEERS to what it prints", dir, name, err)
	}
	return path
}

// CPUTime is the CPU time, user and system, of this process and of the
// children it has waited for (the plugins handlers.Exec ran) so far.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			tb.Fatal(err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}

// ChildMaxRSS is the peak resident memory, in MiB, of the largest child
// this process has waited for so far: a plugin's own memory, which the
// benchmarks' B/op (this process's allocations) leave out.
func ChildMaxRSS(tb testing.TB) float64 {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		tb.Fatal(err)
	}
	return float64(ru.Maxrss) / 1024 // KiB on Linux
}
