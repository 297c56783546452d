package scripts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/authvault/authvault/testkit/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scripts copies hack/background.sh and the hack/timed.sh it runs into a
// directory of the test's, whose bin/ then holds what they write.
func scripts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"background.sh", "timed.sh"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "hack", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hack", name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// background runs hack/background.sh with args in dir and returns its
// output and exit code; one that hangs is killed after testwait.Hang.
func background(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(dir, "hack", "background.sh")}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("background.sh %v: %v", args, err)
		}
		code = exit.ExitCode()
	}
	if ctx.Err() != nil {
		t.Fatalf("background.sh %v still going after %v\n%s", args, testwait.Hang, out)
	}
	return string(out), code
}

// started starts a stage NAME that writes its pid to bin/NAME.cmd and
// sleeps, and returns that pid, once written.
func started(t *testing.T, dir, name string) int {
	t.Helper()
	pidFile := filepath.Join(dir, "bin", name+".cmd")
	if out, code := background(t, dir, "start", name, "bash", "-c", `echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec sleep 60`, pidFile); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	var pid int
	deadline := time.Now().Add(testwait.Hang)
	for {
		if data, err := os.ReadFile(pidFile); err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(data))); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stage did not start within %v", testwait.Hang)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return pid
}

// eventually fails the test unless ok holds within testwait.Hang.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Hang); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", testwait.Hang, what)
		}
	}
}

func TestBackgroundReportsTheStagesResult(t *testing.T) {
	dir := scripts(t)
	if out, code := background(t, dir, "start", "ok", "echo", "built"); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	if out, code := background(t, dir, "start", "broken", "bash", "-c", "echo half-built; exit 3"); code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	out, code := background(t, dir, "wait", "ok")
	if code != 0 || !strings.Contains(out, "built") {
		t.Errorf("wait for a stage that passed: exit %d, want 0 and its log\n%s", code, out)
	}
	out, code = background(t, dir, "wait", "broken")
	if code != 1 || !strings.Contains(out, "half-built") || !strings.Contains(out, "exit 3") {
		t.Errorf("wait for a stage that failed: exit %d, want 1, its log and its exit code\n%s", code, out)
	}
	// Read once: a later wait (a make compat run alone) is not failed by
	// this run's result.
	if out, code := background(t, dir, "wait", "broken"); code != 0 {
		t.Errorf("a second wait: exit %d, want 0\n%s", code, out)
	}
	if out, code := background(t, dir, "wait", "never-started"); code != 0 || out != "" {
		t.Errorf("wait for a stage never started: exit %d, want 0 and nothing said\n%s", code, out)
	}
}

// A stage killed by a signal (Ctrl-C, the OOM killer) has no result: the
// wait says so and passes, and what needs the stage does its work itself.
func TestBackgroundKilledStageIsNoFailure(t *testing.T) {
	dir := scripts(t)
	pid := started(t, dir, "killed")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	out, code := background(t, dir, "wait", "killed")
	if code != 0 || !strings.Contains(out, "did not finish") {
		t.Errorf("wait for a killed stage: exit %d, want 0 and \"did not finish\"\n%s", code, out)
	}
}

// Ctrl-Z stops make's whole job, a background stage with it. The next make
// test must neither wait for the stopped stage nor take it as its own.
func TestBackgroundStoppedStageIsNotWaitedFor(t *testing.T) {
	dir := scripts(t)
	sleeper := started(t, dir, "stopped")
	data, err := os.ReadFile(filepath.Join(dir, "bin", "stopped.pid"))
	if err != nil {
		t.Fatal(err)
	}
	runner, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(runner, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Registered before the temporary directory's removal, so run after
	// it: the stage's command ends first, and its timed.sh writes its
	// line before the test's directory goes; then the stopped runner.
	t.Cleanup(func() {
		syscall.Kill(runner, syscall.SIGKILL)
	})
	t.Cleanup(func() {
		syscall.Kill(sleeper, syscall.SIGKILL)
		eventually(t, "the stopped stage's timed.sh wrote its line", func() bool {
			data, _ := os.ReadFile(filepath.Join(dir, "bin", "stages"))
			return strings.Contains(string(data), "stopped ") && strings.Contains(string(data), " 137")
		})
	})
	eventually(t, "the runner stopped", func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", runner))
		// The state follows the command's name in parentheses.
		_, rest, _ := strings.Cut(string(stat), ") ")
		return err == nil && strings.HasPrefix(rest, "T")
	})

	if out, code := background(t, dir, "start", "stopped", "echo", "a new run"); code != 0 || strings.Contains(out, "still running") {
		t.Fatalf("start beside a stopped run: exit %d, want a new run\n%s", code, out)
	}
	out, code := background(t, dir, "wait", "stopped")
	if code != 0 || !strings.Contains(out, "a new run") {
		t.Errorf("wait: exit %d, want the new run's log\n%s", code, out)
	}
}
