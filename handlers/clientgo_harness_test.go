package handlers

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/pkg/apis/clientauthentication"
	clientexec "k8s.io/client-go/plugin/pkg/client/auth/exec"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/transport"

	"github.com/authvault/authvault/login"
)

// replay is the test plugin in replay mode: it prints output, exits with
// code, and writes the KUBERNETES_EXEC_INFO it got to a file in dir and
// counts its runs in another. Each call makes a new dir, so that
// client-go's cache of authenticators (keyed by the exec config) never
// hands a case another case's authenticator.
type replay struct {
	dir      string
	output   string
	exitCode int
}

func newReplay(t *testing.T, output string, exitCode int) *replay {
	return &replay{dir: t.TempDir(), output: output, exitCode: exitCode}
}

// config adds the plugin to base: its command (unless base names one) and
// the env that drives it.
func (r *replay) config(base clientcmdapi.ExecConfig) clientcmdapi.ExecConfig {
	c := base
	if c.Command == "" {
		c.Command = pluginPath
	}
	c.Env = append(append([]clientcmdapi.ExecEnvVar(nil), c.Env...),
		clientcmdapi.ExecEnvVar{Name: "PLUGIN_MODE", Value: "replay"},
		clientcmdapi.ExecEnvVar{Name: "PLUGIN_OUTPUT", Value: r.output},
		clientcmdapi.ExecEnvVar{Name: "PLUGIN_EXIT_CODE", Value: strconv.Itoa(r.exitCode)},
		clientcmdapi.ExecEnvVar{Name: "PLUGIN_INFO_FILE", Value: filepath.Join(r.dir, "info")},
		clientcmdapi.ExecEnvVar{Name: "PLUGIN_COUNTER", Value: filepath.Join(r.dir, "runs")},
	)
	return c
}

// info is the KUBERNETES_EXEC_INFO of the plugin's last run, "" if none.
func (r *replay) info() string {
	data, _ := os.ReadFile(filepath.Join(r.dir, "info"))
	return string(data)
}

// runs is how many times the plugin ran.
func (r *replay) runs() int {
	data, _ := os.ReadFile(filepath.Join(r.dir, "runs"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}

// clientGoResult is what client-go's exec authenticator made of a plugin.
type clientGoResult struct {
	token string           // the bearer token it sent, "" for none
	cert  *tls.Certificate // the certificate it would present
	err   error
}

// viaClientGo runs cfg through client-go's own exec authenticator, as a
// rest.Config's transport does, against a base round tripper that records
// the Authorization header and never touches the network. requests is how
// many requests go through it. With stdin set, it is os.Stdin while the
// authenticator is made and used: client-go reads os.Stdin itself.
func viaClientGo(t *testing.T, cfg clientcmdapi.ExecConfig, cluster *clientauthentication.Cluster, stdin *os.File, requests int) clientGoResult {
	t.Helper()
	if stdin != nil {
		old := os.Stdin
		os.Stdin = stdin
		defer func() { os.Stdin = old }()
	}
	a, err := clientexec.GetAuthenticator(&cfg, cluster)
	if err != nil {
		return clientGoResult{err: err}
	}
	tc := &transport.Config{}
	if err := a.UpdateTransportConfig(tc); err != nil {
		return clientGoResult{err: err}
	}
	var got clientGoResult
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		got.token = strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	})
	rt := tc.WrapTransport(base)
	for range requests {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://cluster.example/api", nil)
		resp, err := rt.RoundTrip(req)
		cancel()
		if err != nil {
			return clientGoResult{err: err}
		}
		resp.Body.Close()
	}
	if tc.TLS.GetCertHolder != nil {
		got.cert, got.err = tc.TLS.GetCertHolder.GetCert()
	}
	return got
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// devNull is os.DevNull opened for the test: a stdin that is no terminal.
func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// viaExec runs cfg through handlers.Exec, with stdin as its Stdin (a
// non-terminal when nil).
func viaExec(t *testing.T, cfg ExecConfig, stdin *os.File) (*login.ConnectionInfo, error) {
	t.Helper()
	if stdin == nil {
		stdin = devNull(t)
	}
	cfg.Stdin = stdin
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	return run(t, cfg)
}
