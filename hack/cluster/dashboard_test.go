package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testlog"
)

// make dashboard as a person runs it: the program started as a process on
// a proxy port of its own, the URL it prints opened through kubectl proxy
// (the page names alice), a note posted from the page's origin as a
// browser posts it and kept under that name, another site's refused, the
// ConfigMaps alice may list listed and those she may not refused; then
// Ctrl-C, after which the program exits 0 and leaves no
// process and no file behind.
func TestDashboardServesAPersonAndStops(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run make gotest, or KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) go test ./hack/cluster")
	}
	dir := filepath.Join(t.TempDir(), "cluster") // made by the run, as bin/cluster is
	bin := buildProgram(t)
	port := freePort(t)
	start := time.Now()

	var out testlog.Writer
	cmd := exec.Command(bin, "--dir", dir, "--dashboard", "--proxy-port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &out, &out
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

	page := "http://127.0.0.1:" + strconv.Itoa(port) + "/apis/dashboard.authvault.dev/v1/notes"
	// The first build of addon-proxy takes minutes; later ones seconds.
	waitFor(t, 10*time.Minute, exited, &out, "the page's URL", func() bool {
		return strings.Contains(out.String(), "Open this page in a browser:\n\n    "+page+"\n")
	})
	t.Logf("the URL %v after the start", time.Since(start).Round(time.Millisecond))
	for _, want := range []string{`"signed in as ` + person + `"`, "ClusterRole dashboard-user", "deploy/dashboard/impersonate-constrained.yaml", "Ctrl-C"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the program's output does not say %q:\n%s", want, out.String())
		}
	}
	children = childrenOf(t, cmd.Process.Pid)
	// kube-apiserver, etcd, examples/dashboard, addon-proxy, kubectl proxy.
	if len(children) < 5 {
		t.Fatalf("got %d child processes, want the API server, etcd, the dashboard, addon-proxy and kubectl proxy:\n%s", len(children), out.String())
	}
	tmp := tmpDirOf(t, children)

	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	code, body := do(t, client, http.MethodGet, page, "", nil)
	if code != http.StatusOK || !strings.Contains(body, `signed in as <strong id="user">`+person+`</strong>`) {
		t.Fatalf("GET %s: %d, want 200 and the page signed in as %s:\n%s", page, code, person, body)
	}
	// The ConfigMaps the guide promises: team-a's as alice, team-b's
	// refused by the API server.
	configMaps := strings.TrimSuffix(page, "notes") + "configmaps"
	if code, body := do(t, client, http.MethodGet, configMaps, "", nil); code != http.StatusOK || !strings.Contains(body, "<li>settings</li>\n<li>welcome</li>") {
		t.Errorf("GET %s: %d, want 200 and team-a's ConfigMaps:\n%s", configMaps, code, body)
	}
	if code, body := do(t, client, http.MethodGet, configMaps+"?namespace="+teamB, "", nil); code != http.StatusForbidden ||
		!strings.Contains(body, `<p id="forbidden">You may not list ConfigMaps in team-b.</p>`) || strings.Contains(body, "launch-plan") {
		t.Errorf("GET %s?namespace=%s: %d, want the 403 page:\n%s", configMaps, teamB, code, body)
	}

	// A browser posts the page's form with the page's Origin.
	u, _ := url.Parse(page)
	origin := u.Scheme + "://" + u.Host
	note := "hello from the test " + strconv.FormatInt(time.Now().UnixNano(), 36)
	form := url.Values{"text": {note}}.Encode()
	if code, body := do(t, client, http.MethodPost, page, form, http.Header{"Origin": {origin}}); code != http.StatusOK {
		t.Fatalf("POST %s from %s: %d, want 200 (addon-proxy's page for the dashboard's redirect):\n%s", page, origin, code, body)
	}
	if _, body := do(t, client, http.MethodGet, page, "", nil); !strings.Contains(body, "<li>"+person+": "+note+"</li>") {
		t.Errorf("the page after the POST does not list the note under %s:\n%s", person, body)
	}
	forged := "from another site"
	if code, body := do(t, client, http.MethodPost, page, url.Values{"text": {forged}}.Encode(), http.Header{"Origin": {"http://evil.example"}}); code != http.StatusForbidden {
		t.Errorf("POST %s from another site: %d, want 403:\n%s", page, code, body)
	}
	if _, body := do(t, client, http.MethodGet, page, "", nil); strings.Contains(body, forged) {
		t.Errorf("another site's note was kept:\n%s", body)
	}
	token := readToken(t, dir)

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
	case <-time.After(2 * time.Minute):
		t.Fatalf("still running 2 min after SIGINT\n%s", out.String())
	}
	t.Logf("exited %v after SIGINT", time.Since(interrupted).Round(time.Millisecond))
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range children {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("process %d outlived the program", pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, f := range []string{filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "token"), filepath.Join(dir, "pid"), tmp, dir} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left (%v)", f, err)
		}
	}
	if strings.Contains(out.String(), token) {
		t.Errorf("the token was printed:\n%s", out.String())
	}
}

// The port kubectl proxy needs is taken: the program says so, and how to
// pick another, before it builds or starts anything.
func TestDashboardRefusesABusyProxyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	var out strings.Builder
	err = run(context.Background(), options{dir: t.TempDir(), dashboard: true, proxyPort: port}, nil, &out)
	for _, want := range []string{"port " + strconv.Itoa(port), "in use", "DASHBOARD_PROXY_PORT", "--proxy-port"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run with port %d taken = %v, want an error that says %q", port, err, want)
		}
	}
	if out.Len() > 0 {
		t.Errorf("run with the port taken printed %q, want nothing: it started something", out.String())
	}
}

// kubectl proxy runs the user's kubectl, or else hack/envtest.sh's.
func TestKubectlPathPrefersTheUsers(t *testing.T) {
	assets, users := t.TempDir(), t.TempDir()
	for _, d := range []string{assets, users} {
		if err := os.WriteFile(filepath.Join(d, "kubectl"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", assets)
	for _, tc := range []struct {
		path, want string
	}{
		{users, filepath.Join(users, "kubectl")},
		{t.TempDir(), filepath.Join(assets, "kubectl")},
	} {
		t.Setenv("PATH", tc.path)
		if got, err := kubectlPath(); err != nil || got != tc.want {
			t.Errorf("kubectlPath with PATH=%s = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
	t.Setenv("PATH", t.TempDir())
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	if got, err := kubectlPath(); err == nil || !strings.Contains(err.Error(), "hack/envtest.sh") {
		t.Errorf("kubectlPath with no kubectl = %q, %v; want an error that names hack/envtest.sh", got, err)
	}
}

// buildProgram builds the program into a temporary directory.
func buildProgram(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "authvault-cluster")
	start := time.Now()
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the program: %v\n%s", err, out)
	}
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// tlsCertFile is addon-proxy's serving certificate on its command line.
var tlsCertFile = regexp.MustCompile(`--tls-cert-file (\S+)`)

// tmpDirOf is the program's temporary directory (addon-proxy's binary and
// serving certificate), read from addon-proxy's command line among pids.
func tmpDirOf(t *testing.T, pids []int) string {
	t.Helper()
	for _, pid := range pids {
		args, err := exec.Command("ps", "-o", "args=", "-p", strconv.Itoa(pid)).Output()
		if err != nil {
			continue
		}
		if m := tlsCertFile.FindSubmatch(args); m != nil {
			return filepath.Dir(string(m[1]))
		}
	}
	t.Fatal("no addon-proxy among the program's children")
	return ""
}

// do sends a request, a form if body is not empty, and returns the
// status and the body.
func do(t *testing.T, client *http.Client, method, url, body string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode, string(b)
}
