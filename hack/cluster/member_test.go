package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testlog"
)

// docs/federation.md's walk-through, as a user runs it: make cluster-pair's
// program with --member, then examples/federation with the files it wrote
// (the member's address and CA, nothing else of the member's), which lists
// the member's namespaces as the hub's ServiceAccount; Ctrl-C removes the
// files.
func TestClusterPairServesTheGuidesWalkThrough(t *testing.T) {
	dir := t.TempDir()
	bin := buildProgram(t)
	example := filepath.Join(t.TempDir(), "federation-example")
	if out, err := exec.Command("go", "build", "-o", example, "../../examples/federation").CombinedOutput(); err != nil {
		t.Fatalf("building examples/federation: %v\n%s", err, out)
	}

	var out testlog.Writer
	cmd := exec.Command(bin, "--dir", dir, "--member")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Error("the program did not exit after SIGKILL")
		}
	})
	waitFor(t, 2*time.Minute, exited, &out, "the pair's guide", func() bool { return strings.Contains(out.String(), "Ctrl-C stops both") })
	if n := len(childrenOf(t, cmd.Process.Pid)); n < 4 {
		t.Errorf("got %d child processes, want two API servers and two etcds", n)
	}

	server, err := os.ReadFile(filepath.Join(dir, "member-server"))
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command(example, "--kubeconfig", filepath.Join(dir, "kubeconfig"),
		"--member-server", strings.TrimSpace(string(server)), "--member-ca", filepath.Join(dir, "member-ca.crt"), "--once")
	got, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "the member's namespaces, as fleet-system/fleet-operator of the hub: [default") {
		t.Fatalf("examples/federation: %v\n%s", err, got)
	}
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), strings.TrimSpace(string(token))) {
		t.Errorf("the example printed the hub's token:\n%s", got)
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("after SIGINT: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("still running 60 s after SIGINT\n%s", out.String())
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left in %s (%v)", f, dir, err)
		}
	}
}
