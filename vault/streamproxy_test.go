package vault

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// connectProxy is an HTTP proxy that tunnels CONNECT requests and records
// their targets.
type connectProxy struct {
	srv *httptest.Server

	refuse bool // answer every CONNECT 407

	mu      sync.Mutex
	targets []string
	conns   []net.Conn
}

func newConnectProxy(t *testing.T) *connectProxy {
	p := &connectProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.srv.Close()
	})
	return p
}

func (p *connectProxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
		return
	}
	if p.refuse {
		w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
		return
	}
	upstream, err := net.Dial("tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	client, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	p.mu.Lock()
	p.targets = append(p.targets, r.Host)
	p.conns = append(p.conns, client, upstream)
	p.mu.Unlock()
	_, _ = io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() { _, _ = io.Copy(upstream, client); _ = upstream.Close() }()
	go func() { _, _ = io.Copy(client, upstream); _ = client.Close() }()
}

func (p *connectProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// An upgrade goes through the proxy its credential names, as the
// credential's ordinary requests do, with the credential's token; client-go
// alone would dial the server directly (the config's Proxy is the
// environment's).
func TestUpgradeGoesThroughTheCredentialsProxy(t *testing.T) {
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, "")
	srv.allow("tok")
	proxy := newConnectProxy(t)
	v := New(Options{})
	t.Cleanup(v.Close)
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "tok", ProxyURL: proxy.srv.URL}))
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.srv.URL, "https://")

	for _, tc := range []struct {
		name string
		exec func() (remotecommand.Executor, error)
	}{
		{"spdy", func() (remotecommand.Executor, error) {
			u, _ := http.NewRequest(http.MethodPost, srv.URL()+"/exec-spdy", nil)
			return remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u.URL)
		}},
		{"websocket", func() (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, srv.URL()+"/exec-websocket")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(proxy.seen())
			exec, err := tc.exec()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// The server answers 200, not 101: the upgrade fails after
			// reaching it, which is all this test needs.
			err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
			if err == nil {
				t.Fatal("StreamWithContext() succeeded against a server that does not upgrade")
			}
			targets := proxy.seen()[before:]
			if len(targets) != 1 || targets[0] != host {
				t.Errorf("proxy tunnelled to %q, want once to the server %s", targets, host)
			}
			var got *seen
			for _, r := range srv.seen() {
				if r.Path == "/exec-"+tc.name {
					got = &r
				}
			}
			if got == nil || got.Auth != "Bearer tok" {
				t.Errorf("server saw the upgrade as %+v, want it with the credential's token", got)
			}
		})
	}
}

// A proxy that refuses the upgrade's tunnel gives an error that names the
// proxy without its user name or password (client-go's SPDY dialer quotes
// the proxy URL with its user name).
func TestUpgradeProxyRefusalQuotesNoUserInfo(t *testing.T) {
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, "")
	srv.allow("tok")
	proxy := newConnectProxy(t)
	proxy.refuse = true
	proxyURL := strings.Replace(proxy.srv.URL, "http://", "http://proxy-user:proxy-pass@", 1)
	v := New(Options{})
	t.Cleanup(v.Close)
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "tok", ProxyURL: proxyURL}))
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u, _ := http.NewRequest(http.MethodPost, srv.URL()+"/exec", nil)
	for name, newExec := range map[string]func() (remotecommand.Executor, error){
		"spdy": func() (remotecommand.Executor, error) {
			return remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u.URL)
		},
		"websocket": func() (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.URL.String())
		},
	} {
		exec, err := newExec()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
		cancel()
		if err == nil {
			t.Fatalf("%s: upgrade through a refusing proxy succeeded", name)
		}
		for _, form := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
			if strings.Contains(form, "proxy-user") || strings.Contains(form, "proxy-pass") {
				t.Errorf("%s: error %q quotes the proxy's user info", name, form)
			}
		}
	}
	if len(srv.seen()) != 0 {
		t.Errorf("server saw %d requests past a refusing proxy", len(srv.seen()))
	}
}
