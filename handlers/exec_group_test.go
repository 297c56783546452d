//go:build linux

package handlers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testwait"
)

// readPids reads the pids the test plugin wrote to pidfile.
func readPids(t *testing.T, pidfile string) []int {
	t.Helper()
	raw, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatalf("the plugin wrote no pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(raw)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 1 {
			t.Fatalf("pidfile holds %q", raw)
		}
		pids = append(pids, pid)
	}
	return pids
}

// longWaitDelay makes execWaitDelay a minute for the test: a login that
// waited for it, rather than ending at once, would then run past
// testwait.Hang, whatever the machine's speed (with the 2-s delay, "at
// once" was a second's bound, which a busy machine could need to start
// the plugin).
func longWaitDelay(t *testing.T) {
	saved := execWaitDelay
	execWaitDelay = time.Minute
	t.Cleanup(func() { execWaitDelay = saved })
}

// waitGone fails the test unless pid is dead within d: gone, or a zombie
// (an orphan waits for init to reap it, which here may take a second).
func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if state := processState(pid); state == "Z" || state == "" && syscall.Kill(pid, 0) == syscall.ESRCH {
			return
		}
		if time.Now().After(deadline) {
			state := processState(pid)
			_ = syscall.Kill(pid, syscall.SIGKILL) // leave nothing behind
			t.Fatalf("process %d is still there in state %q, %v after", pid, state, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A plugin that exits and leaves a child holding its stdout or stderr: the
// login ends as soon as the plugin exits, with the credential it printed,
// and the child is ended with it.
func TestExecChildLeftHoldingOutput(t *testing.T) {
	tests := []struct {
		mode, wantErr string
	}{
		{"daemon", ""},
		{"daemon-stderr", ""},
		{"daemon-garbage", "output is not a JSON object"},
		{"daemon-fail", "exited with code 2"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			longWaitDelay(t)
			pidfile := filepath.Join(t.TempDir(), "pids")
			cfg, _ := plugin(t, tt.mode, "PLUGIN_PIDFILE", pidfile)
			start := time.Now()
			info, err := run(t, cfg)
			elapsed := time.Since(start)
			for _, pid := range readPids(t, pidfile) {
				waitGone(t, pid, testwait.Hang)
			}
			if tt.wantErr == "" {
				if err != nil || info.Token != "plugin-token-1" {
					t.Errorf("credential = %v, %v; want the plugin's token", info, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want %q", err, tt.wantErr)
			}
			if elapsed > testwait.Hang {
				t.Errorf("the login took %v, want it to end once the plugin exits, not after the wait delay (%v)", elapsed, execWaitDelay)
			}
		})
	}
}

// The same with the operator's stderr a file: it goes to the plugin as is.
func TestExecChildLeftHoldingOutputStderrFile(t *testing.T) {
	longWaitDelay(t)
	pidfile := filepath.Join(t.TempDir(), "pids")
	cfg, _ := plugin(t, "daemon", "PLUGIN_PIDFILE", pidfile)
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg.Stderr = f
	start := time.Now()
	info, err := run(t, cfg)
	if err != nil || info.Token != "plugin-token-1" || time.Since(start) > testwait.Hang {
		t.Errorf("credential = %v, %v after %v; want the plugin's token at once, not after the wait delay (%v)", info, err, time.Since(start), execWaitDelay)
	}
	for _, pid := range readPids(t, pidfile) {
		waitGone(t, pid, testwait.Hang)
	}
}

// A child that left the plugin's process group cannot be ended with it; it
// holds the login no longer than the wait delay, and the credential the
// plugin printed is accepted.
func TestExecEscapedChildHoldsTheLoginBriefly(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	cfg, _ := plugin(t, "daemon-setsid", "PLUGIN_PIDFILE", pidfile)
	start := time.Now()
	info, err := run(t, cfg)
	elapsed := time.Since(start)
	for _, pid := range readPids(t, pidfile) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(t, pid, testwait.Hang)
	}
	if err != nil || info.Token != "plugin-token-1" {
		t.Errorf("credential = %v, %v; want the plugin's token", info, err)
	}
	// The child sleeps a minute: a login that waited for it would take
	// that, one that stops at the wait delay (2 s) takes that and what a
	// busy machine adds.
	if elapsed > execWaitDelay+testwait.Hang {
		t.Errorf("the login took %v, want at most the wait delay %v", elapsed, execWaitDelay)
	}
}

// A plugin that hangs and ignores polite signals ends at the login's
// deadline, with its whole process group.
func TestExecHangingPluginEndsAtTheDeadline(t *testing.T) {
	for _, first := range []time.Duration{300 * time.Millisecond, time.Second} {
		t.Run(first.String(), func(t *testing.T) {
			longWaitDelay(t) // a polite stop would wait it out: the plugin ignores it
			// On a busy machine the deadline may pass before the shell has
			// started its child and written their pids: then there is no
			// group to check, and the login runs again with twice the time,
			// so that the machine's speed never decides the verdict.
			for timeout := first; ; timeout *= 2 {
				if timeout > testwait.Hang {
					t.Fatalf("the plugin never wrote its pids before a deadline of up to %v", timeout/2)
				}
				pidfile := filepath.Join(t.TempDir(), "pids")
				cfg, _ := plugin(t, "hang", "PLUGIN_PIDFILE", pidfile)
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				start := time.Now()
				_, err := Exec(cfg)(ctx)
				elapsed := time.Since(start)
				cancel()
				if err == nil || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error = %v, want the deadline", err)
				}
				if elapsed > timeout+testwait.Hang {
					t.Errorf("the login took %v, want it to end at its %v deadline", elapsed, timeout)
				}
				if raw, err := os.ReadFile(pidfile); err != nil || len(raw) == 0 {
					continue // not written, or created and not yet written
				}
				pids := readPids(t, pidfile)
				if len(pids) != 2 {
					t.Fatalf("pids = %v, want the plugin's and its child's", pids)
				}
				for _, pid := range pids {
					waitGone(t, pid, testwait.Hang)
				}
				return
			}
		})
	}
}

// A cancelled login (no deadline) ends the plugin's group too.
func TestExecCancelEndsTheGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	cfg, _ := plugin(t, "hang", "PLUGIN_PIDFILE", pidfile)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := os.Stat(pidfile); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	_, err := Exec(cfg)(ctx)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want the cancellation", err)
	}
	for _, pid := range readPids(t, pidfile) {
		waitGone(t, pid, testwait.Hang)
	}
}
