package scripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testlog"
)

// lockScript is hack/lock.sh, from this package's directory.
var lockScript, _ = filepath.Abs("../../hack/lock.sh")

// hang bounds a wait that only a bug makes long.
const hang = 2 * time.Minute

// takeLock starts bash taking the lock file with hack/lock.sh, then
// running then; its stderr goes to stderr.
func takeLock(t *testing.T, file, then string, stderr *testlog.Writer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "-c", fmt.Sprintf(". %q; take_lock build %q; %s", lockScript, file, then))
	cmd.Env = append(os.Environ(), "AUTHVAULT_LOCK_REPORT=1")
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// waitFor polls cond until it holds, failing t after hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A build that waits for another names the holder (its pid and command,
// and the command that started it), keeps naming it while it waits, says
// when it is stopped, and goes on once the holder ends.
func TestAWaitingBuildNamesTheHolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tools.lock")
	holder := takeLock(t, file, "exec sleep 600", &testlog.Writer{})
	waitFor(t, "the holder to write who it is", func() bool {
		data, err := os.ReadFile(file + ".holder")
		return err == nil && strings.HasPrefix(string(data), fmt.Sprint(holder.Process.Pid)+"\t")
	})

	var waiting testlog.Writer
	waiter := takeLock(t, file, "echo took it >&2", &waiting)
	named := fmt.Sprintf("held by pid %d: bash -c", holder.Process.Pid)
	waitFor(t, "the waiting line", func() bool {
		return strings.Contains(waiting.String(), "build: waiting for another build of these binaries, "+named)
	})
	waitFor(t, "a line after the first", func() bool { return strings.Contains(waiting.String(), "build: still waiting after") })
	if !strings.Contains(waiting.String(), "take_lock build") || !strings.Contains(waiting.String(), "(started by: ") {
		t.Errorf("the lines do not name the holder's command and its parent:\n%s", waiting.String())
	}

	if err := holder.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a line that says the holder is stopped", func() bool {
		return strings.Contains(waiting.String(), fmt.Sprintf("held by pid %d, STOPPED (resume it with fg, or kill it)", holder.Process.Pid))
	})
	_ = holder.Process.Kill()
	_ = holder.Wait()
	// The holder's bash became its sleep (exec), which held the lock's
	// file descriptor: killed, it frees the lock.
	done := make(chan error, 1)
	go func() { done <- waiter.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiter failed: %v\n%s", err, waiting.String())
		}
	case <-time.After(hang):
		t.Fatalf("the waiter still waits after its holder was killed:\n%s", waiting.String())
	}
	if !strings.HasSuffix(waiting.String(), "took it\n") {
		t.Errorf("the waiter did not take the lock:\n%s", waiting.String())
	}
}

// A lock that fails for another reason than its holder (here a report
// period flock refuses) ends the build at once, as a plain flock's
// failure did, rather than loop printing that it waits.
func TestALockThatCannotBeTakenEndsTheBuild(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tools.lock")
	holder := takeLock(t, file, "exec sleep 600", &testlog.Writer{})
	waitFor(t, "the holder to write who it is", func() bool {
		_, err := os.Stat(file + ".holder")
		return err == nil
	})
	cmd := exec.Command("bash", "-c", fmt.Sprintf("set -e; . %q; take_lock build %q; echo took it", lockScript, file))
	cmd.Env = append(os.Environ(), "AUTHVAULT_LOCK_REPORT=x")
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "took it") {
		t.Errorf("the build went on: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "still waiting"); n > 0 {
		t.Errorf("it printed %d waiting lines for a lock it cannot take:\n%s", n, out)
	}
	_ = holder.Process.Kill()
}
