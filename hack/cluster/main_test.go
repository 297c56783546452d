package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"go.uber.org/goleak"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/vault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The README's "no cluster?" path, run as a user runs it: the program
// built and started as a process, a kubeconfig it writes, requests through
// client-go and through a vault, `make cluster-revoke`, the 401 for the old
// token while the vault goes on with the new one, and Ctrl-C (SIGINT to its
// process group) that stops the API server and etcd with it.
func TestClusterServesRevokesAndStops(t *testing.T) {
	// A directory the run makes, as make cluster makes bin/cluster: it
	// goes with the files.
	dir := filepath.Join(t.TempDir(), "bin", "cluster")
	bin := buildProgram(t)
	start := time.Now()

	var out testlog.Writer
	cmd := exec.Command(bin, "--dir", dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	// A process group of its own, as a shell gives a foreground job: Ctrl-C
	// reaches the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var children []int
	t.Cleanup(func() {
		// Only after a failure: the test below stops it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, pid := range children {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Error("the program did not exit after SIGKILL")
		}
	})

	kubeconfig := filepath.Join(dir, "kubeconfig")
	waitFor(t, 60*time.Second, exited, &out, "the kubeconfig", func() bool {
		_, err := os.Stat(kubeconfig)
		return err == nil
	})
	t.Logf("the kubeconfig %v after the start", time.Since(start).Round(time.Millisecond))
	for _, want := range []string{"go run ./examples/quickstart --kubeconfig " + kubeconfig, "make cluster-revoke", "Ctrl-C"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the program's output does not say %q:\n%s", want, out.String())
		}
	}
	children = childrenOf(t, cmd.Process.Pid)
	if len(children) < 2 {
		t.Fatalf("got %d child processes, want the API server and etcd", len(children))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mustClient(t, cfg).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("a request with the kubeconfig: %v", err)
	}
	first := readToken(t, dir)
	// A client that keeps the first token, as one that read it once does.
	pinned := rest.CopyConfig(cfg)
	pinned.BearerToken, pinned.BearerTokenFile = first, ""
	old := mustClient(t, pinned)

	var logs testlog.Buffer
	v := vault.New(vault.Options{NoFallback: true, Logger: logs.Logger(1)})
	defer v.Close()
	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: kubeconfig}), login.ID("cluster kubeconfig"))
	vcfg, err := v.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	viaVault := mustClient(t, vcfg)

	revoke := exec.Command("make", "-C", "../..", "cluster-revoke", "CLUSTER_DIR="+dir)
	if out, err := revoke.CombinedOutput(); err != nil {
		t.Fatalf("make cluster-revoke: %v\n%s", err, out)
	}
	// The API server trusts its last review of a token for 10 s.
	revoked := time.Now()
	deadline := revoked.Add(30 * time.Second)
	for {
		_, err := old.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsUnauthorized(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked token still works 30 s on (last error: %v)", err)
		}
		// Callers of the vault never see the revocation.
		if _, err := viaVault.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatalf("a request through the vault during the revocation: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the revoked token got 401 %v after make cluster-revoke", time.Since(revoked).Round(time.Millisecond))
	second := readToken(t, dir)
	if second == first {
		t.Fatal("the token file still holds the revoked token")
	}
	if _, err := viaVault.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("a request through the vault after the revocation: %v", err)
	}
	fresh, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mustClient(t, fresh).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("a request with the kubeconfig's new token: %v", err)
	}

	// Ctrl-C.
	interrupted := time.Now()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("after SIGINT: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("still running 60 s after SIGINT\n%s", out.String())
	}
	t.Logf("exited %v after SIGINT", time.Since(interrupted).Round(time.Millisecond))
	deadline = time.Now().Add(30 * time.Second)
	for _, pid := range children {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("process %d (the API server or etcd) outlived the program", pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, f := range []string{"kubeconfig", "token", "pid"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left in %s (%v)", f, dir, err)
		}
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directories the run made are left: %s (%v)", filepath.Dir(dir), err)
	}

	// No token in anything it printed, nor in the vault's log.
	for _, tok := range []string{first, second} {
		if strings.Contains(out.String(), tok) || strings.Contains(logs.String(), tok) {
			t.Errorf("a token was printed:\n%s\n%s", out.String(), logs.String())
		}
	}

	// With nothing running, the revoke says so and fails.
	revoke = exec.Command("make", "-s", "-C", "../..", "cluster-revoke", "CLUSTER_DIR="+dir)
	got, err := revoke.CombinedOutput()
	if err == nil || !strings.Contains(string(got), "make cluster") {
		t.Errorf("make cluster-revoke with no cluster: %v, %q; want a failure that says to run make cluster", err, got)
	}
}

// waitFor polls done until it holds, failing the test if the program exits
// first or limit passes.
func waitFor(t *testing.T, limit time.Duration, exited chan error, out *testlog.Writer, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !done() {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the program exited (%v) before %s:\n%s", err, what, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v:\n%s", what, limit, out.String())
		}
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	ps, err := exec.Command("ps", "-A", "-o", "pid=,ppid=").Output()
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for line := range strings.Lines(string(ps)) {
		f := strings.Fields(line)
		if len(f) == 2 && f[1] == strconv.Itoa(pid) {
			kid, _ := strconv.Atoi(f[0])
			kids = append(kids, kid)
		}
	}
	return kids
}

func readToken(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func mustClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
