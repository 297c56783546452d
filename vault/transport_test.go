package vault

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

// get sends a request through v and returns its status and body.
func send(t *testing.T, v *Vault, req *http.Request) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Transport: v.Transport(), Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func get(t *testing.T, v *Vault, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, v, req)
}

func TestTransportAuthenticatesWithTheToken(t *testing.T) {
	v, srv, iss := issuingVault(t, Options{}, "")
	if status, body := get(t, v, srv.URL()+"/api/v1/pods"); status != 200 || !strings.Contains(body, "token:tok-1") {
		t.Fatalf("GET = %d %s, want 200 as tok-1", status, body)
	}
	if got := srv.seen()[0].Auth; got != "Bearer "+iss.latest() {
		t.Errorf("Authorization = %q, want the bearer token", got)
	}
}

// servedWorkers counts the workers (by User-Agent) that token has served.
func servedWorkers(srv *apiServer, token string) int {
	workers := map[string]bool{}
	for _, r := range srv.seen() {
		if r.Status != http.StatusUnauthorized && r.Auth == "Bearer "+token {
			workers[r.UserAgent] = true
		}
	}
	return len(workers)
}

// Rotation and revocation mid-stream: no caller ever sees a 401.
func TestRevocationIsInvisibleToCallers(t *testing.T) {
	// Each token is revoked once it has served 40 requests and at least
	// one of every worker's: counted, not timed, so that a loaded machine
	// (a new token's TLS handshake under -race, a worker descheduled for a
	// few milliseconds) cannot make a request held for the next login meet
	// the revocation of the token it waited for. Counting requests alone
	// let the other workers spend a token before a late one's retry came.
	v, srv, iss := issuingVault(t, Options{}, "", login.Backoff(5*time.Millisecond, time.Second))

	const workers, perWorker = 4, 400
	var wg sync.WaitGroup
	failures := make(chan string, workers*perWorker)
	stop := make(chan struct{})
	revoked := 0
	go func() { // revoke each token once it has served 40 requests
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				if tok, _ := iss.newest(); tok != "" && srv.servedTimes(tok) >= 40 && servedWorkers(srv, tok) == workers {
					srv.revoke(tok)
				}
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			for range perWorker {
				req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/api/v1/configmaps", nil)
				req.Header.Set("User-Agent", fmt.Sprintf("worker-%d", w))
				resp, err := (&http.Client{Transport: v.Transport()}).Do(req)
				if err != nil {
					failures <- err.Error()
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failures <- resp.Status
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	close(failures)
	for f := range failures {
		t.Errorf("a caller saw: %s", f)
	}
	for _, r := range srv.seen() {
		if r.Status == http.StatusUnauthorized {
			revoked++
		}
	}
	if revoked == 0 || iss.count() < 2 {
		t.Errorf("the server answered %d 401s and %d tokens were issued: the test did not rotate", revoked, iss.count())
	}
	t.Logf("%d requests, %d answered 401 and retried, %d tokens", len(srv.seen()), revoked, iss.count())
}

func TestPostBodyIsReplayedAfter401(t *testing.T) {
	v, srv, iss := issuingVault(t, Options{}, "")
	mustSelect(t, v)
	srv.revoke(iss.latest())

	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/api/v1/namespaces/default/secrets", strings.NewReader(`{"data":"x"}`))
	status, body := send(t, v, req)
	if status != 200 || !strings.Contains(body, `"body":"{\"data\":\"x\"}"`) {
		t.Fatalf("POST = %d %s, want 200 with the body", status, body)
	}
	s := srv.seen()
	if len(s) != 2 || s[0].Status != 401 || s[1].Body != `{"data":"x"}` || s[0].Auth == s[1].Auth {
		t.Errorf("server saw %+v, want a 401 then the same body with a new token", s)
	}
}

func TestStreamedBodyIsNotReplayed(t *testing.T) {
	v, srv, iss := issuingVault(t, Options{}, "")
	first := mustSelect(t, v)
	srv.revoke(iss.latest())

	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/upload", io.NopCloser(strings.NewReader("stream")))
	req.GetBody = nil // a stream: cannot be sent twice
	if status, _ := send(t, v, req); status != http.StatusUnauthorized {
		t.Fatalf("POST of a stream = %d, want its 401", status)
	}
	if len(srv.seen()) != 1 {
		t.Errorf("server saw %d requests, want 1: a stream is not replayed", len(srv.seen()))
	}
	if c := mustSelect(t, v); c == first {
		t.Error("the rejected credential was not invalidated")
	}
}

func TestClientCertificateAndMixedKinds(t *testing.T) {
	serverCA, clientCA := testpki.NewCA(t), testpki.NewCA(t)
	srv := newAPIServer(t, serverCA, clientCA, "")
	certPEM, keyPEM := clientCA.Issue(t, "operator", false)
	srv.allowCert("operator")
	srv.allowBasic("admin", "hunter2-long-password")
	srv.allow("static-token")
	v := New(Options{})
	defer v.Close()
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: serverCA.PEM, CertificateData: certPEM, PrivateKeyData: keyPEM}), login.ID("cert"))
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: serverCA.PEM, Username: "admin", Password: "hunter2-long-password"}), login.ID("basic"))
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: serverCA.PEM, Token: "static-token"}), login.ID("token"))
	mustSelect(t, v)
	eventually(t, "three credentials", func() bool { return v.snap.Load().size() == 3 })

	users := map[string]int{}
	for range 60 {
		status, body := get(t, v, srv.URL()+"/whoami")
		if status != 200 {
			t.Fatalf("GET = %d %s", status, body)
		}
		for _, u := range []string{"cert:operator", "basic:admin", "token:static-token"} {
			if strings.Contains(body, u) {
				users[u]++
			}
		}
	}
	if len(users) != 3 {
		t.Errorf("users seen = %v, want all three kinds", users)
	}
	for _, r := range srv.seen() {
		if r.CertCN == "operator" && r.Auth != "" {
			t.Errorf("a certificate request also carried %q", r.Auth)
		}
	}
}

// handlerOf returns a copy of info on every login.
func handlerOf(info login.ConnectionInfo) login.Handler {
	return func(context.Context) (*login.ConnectionInfo, error) {
		c := info
		return &c, nil
	}
}

func TestSeveralServersEachGetTheirOwnCredentials(t *testing.T) {
	ca := testpki.NewCA(t)
	a := newAPIServer(t, ca, nil, "")
	b := newAPIServer(t, ca, nil, "/k8s/clusters/c-1")
	a.allow("token-a")
	b.allow("token-b")
	v := New(Options{})
	defer v.Close()
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: a.URL(), CAData: ca.PEM, Token: "token-a"}), login.ID("a"))
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: b.URL(), CAData: ca.PEM, Token: "token-b"}), login.ID("b"))
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "both credentials", func() bool { return v.snap.Load().size() == 2 })
	for range 40 {
		if status, body := get(t, v, cfg.Host+"/api/v1/namespaces"); status != 200 {
			t.Fatalf("GET = %d %s", status, body)
		}
	}
	for name, s := range map[string]*apiServer{"a": a, "b": b} {
		reqs := s.seen()
		if len(reqs) == 0 {
			t.Errorf("server %s got no request", name)
		}
		for _, r := range reqs {
			if r.Auth != "Bearer token-"+name || r.Path != "/api/v1/namespaces" {
				t.Errorf("server %s saw %s with %q, want its own token and the path below its prefix", name, r.Path, r.Auth)
			}
		}
	}
}

func TestRedirectToAnotherHostCarriesNoCredential(t *testing.T) {
	v, srv, _ := tokenVault(t, "secret-token")
	var elsewhere []string
	var mu sync.Mutex
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer other.Close()

	if status, _ := get(t, v, srv.URL()+"/redirect?to="+other.URL+"/landing"); status != 200 {
		t.Fatalf("GET through the redirect = %d, want 200", status)
	}
	if len(elsewhere) != 1 || elsewhere[0] != "" {
		t.Errorf("the other host saw Authorization %q, want one request with none", elsewhere)
	}
	if srv.seen()[0].Auth != "Bearer secret-token" {
		t.Error("the vault's own server did not get the credential")
	}
	// Structurally: a foreign URL goes through the plain transport.
	req, _ := http.NewRequest(http.MethodGet, other.URL, nil)
	out, rt, routed := v.prepare(req, mustSelect(t, v), false)
	if routed || rt != v.pool.plain() || out.Header.Get("Authorization") != "" {
		t.Error("a foreign URL was routed with the credential")
	}
}

func TestOwnAuthorizationIsSentUntouched(t *testing.T) {
	v, srv, _ := tokenVault(t, "vault-token")
	cred := mustSelect(t, v)
	req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/x", nil)
	req.Header.Set("Authorization", "Bearer callers-own")
	if status, _ := send(t, v, req); status != http.StatusUnauthorized {
		t.Errorf("GET with a bad own token = %d, want its 401", status)
	}
	if got := srv.seen()[0].Auth; got != "Bearer callers-own" {
		t.Errorf("server saw %q, want the caller's own header", got)
	}
	if c := mustSelect(t, v); c != cred {
		t.Error("a 401 on the caller's own header invalidated the vault's credential")
	}
}

func TestOnly401Invalidates(t *testing.T) {
	v, srv, _ := tokenVault(t, "t")
	cred := mustSelect(t, v)
	if status, _ := get(t, v, srv.URL()+"/forbidden"); status != http.StatusForbidden {
		t.Errorf("GET = %d, want 403", status)
	}
	srv.srv.CloseClientConnections()
	if c := mustSelect(t, v); c != cred {
		t.Error("a 403 invalidated the credential")
	}
	// A network error does not invalidate either.
	dead := login.ConnectionInfo{Server: "https://127.0.0.1:1", Token: "t"}
	v2 := New(Options{})
	defer v2.Close()
	v2.OnLogin(handlerOf(dead))
	c2 := mustSelect(t, v2)
	if _, err := (&http.Client{Transport: v2.Transport()}).Get(dead.Server + "/x"); err == nil {
		t.Fatal("GET of a closed port succeeded")
	}
	if c := mustSelect(t, v2); c != c2 {
		t.Error("a network error invalidated the credential")
	}
}

func TestTLSVerificationIsOnUnlessInsecure(t *testing.T) {
	ca := testpki.NewCA(t)
	srv := newAPIServer(t, ca, nil, "")
	srv.allow("t")
	strict := New(Options{})
	defer strict.Close()
	strict.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), Token: "t"})) // no CA
	_, err := (&http.Client{Transport: strict.Transport()}).Get(srv.URL() + "/x")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("GET without the CA = %v, want a certificate error", err)
	}
	insecure := New(Options{})
	defer insecure.Close()
	insecure.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), Token: "t", Insecure: true}))
	if status, _ := get(t, insecure, srv.URL()+"/x"); status != 200 {
		t.Errorf("GET with Insecure = %d, want 200", status)
	}
}

// Each token has connections of its own (a 401 of one ends no other's): a
// rotation opens one connection, and the old token's is closed once idle,
// without waiting for the grace period kept for client certificates.
func TestRotationOpensOneConnectionAndClosesTheOld(t *testing.T) {
	v, srv, iss := issuingVault(t, Options{}, "", login.Backoff(time.Millisecond, time.Millisecond)) // no login floor
	for range 10 {
		for range 3 { // requests of one token share its connection
			if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
				t.Fatal("GET failed")
			}
		}
		_ = v.Invalidate(context.Background(), mustSelect(t, v), errors.New("rotate"))
	}
	addrs := map[string]bool{}
	for _, s := range srv.seen() {
		addrs[s.RemoteAddr] = true
	}
	if len(addrs) != 10 || iss.count() != 10 {
		t.Errorf("%d connections for %d tokens, want 10 for 10 used", len(addrs), iss.count())
	}
	eventually(t, "the old tokens' connections to close", func() bool {
		live, retired := v.pool.openConns()
		return live == 0 && retired == 0
	})
}

// A watch keeps streaming while its credential is invalidated; once it ends,
// the connection of the retired identity is closed.
func TestWatchOutlivesItsCredential(t *testing.T) {
	serverCA, clientCA := testpki.NewCA(t), testpki.NewCA(t)
	srv := newAPIServer(t, serverCA, clientCA, "")
	srv.allowCert("operator")
	var mu sync.Mutex
	n := 0
	v := New(Options{TransportGrace: -1}) // retire the old identity at the next sweep
	defer v.Close()
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		cert, key := clientCA.Issue(t, "operator", false) // a new identity on each login
		return &login.ConnectionInfo{Server: srv.URL(), CAData: serverCA.PEM, CertificateData: cert, PrivateKeyData: key}, nil
	})
	cred := mustSelect(t, v)
	resp, err := (&http.Client{Transport: v.Transport()}).Get(srv.URL() + "/api/v1/watch")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("watch = %v %v", resp, err)
	}
	lines := bufio.NewScanner(resp.Body)
	readLines := func(k int) {
		for range k {
			if !lines.Scan() {
				t.Fatalf("watch ended: %v", lines.Err())
			}
		}
	}
	readLines(3)
	_ = v.Invalidate(context.Background(), cred, errors.New("rotated"))
	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 { // with the new identity
		t.Fatal("GET with the new identity failed")
	}
	eventually(t, "the old identity to retire", func() bool {
		_, retired := v.pool.openConns()
		return retired == 1
	})
	readLines(10) // the old connection still streams
	resp.Body.Close()
	eventually(t, "the retired connection to close", func() bool {
		_, retired := v.pool.openConns()
		return retired == 0
	})
}

func TestRequestWaitsWithinItsContext(t *testing.T) {
	v := New(Options{})
	defer v.Close()
	block := make(chan struct{})
	defer close(block)
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return nil, errors.New("never")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example/x", bytes.NewReader([]byte("b")))
	_, err := v.Transport().RoundTrip(req)
	var le *LoginError
	if !errors.As(err, &le) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RoundTrip() error = %v, want a LoginError by the deadline", err)
	}
}

// An authenticator outage: every credential is rejected, even fresh ones.
// The handler backs off instead of logging in once per request, callers get
// a LoginError at once, and the vault serves again soon after the outage.
func TestAuthenticatorOutage(t *testing.T) {
	v, srv, iss := issuingVault(t, Options{}, "", login.Backoff(50*time.Millisecond, 100*time.Millisecond))
	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
		t.Fatal("GET before the outage failed")
	}
	srv.down.Store(true)
	loginErrors, unauthorized := 0, 0
	start := time.Now()
	for range 50 {
		// The vault is to answer at once (a 401 or a LoginError): the
		// deadline is only a hang's, so that a busy machine's slow login
		// is not mistaken for a wait.
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/x", nil)
		resp, err := v.Transport().RoundTrip(req)
		cancel()
		var le *LoginError
		switch {
		case errors.As(err, &le):
			loginErrors++
			if !errors.Is(err, errRejectedAtOnce) {
				t.Errorf("LoginError = %v, want it to say the credentials were rejected at once", err)
			}
		case err == nil && resp.StatusCode == http.StatusUnauthorized:
			unauthorized++
			resp.Body.Close()
		default:
			t.Fatalf("during the outage: %v %v", resp, err)
		}
	}
	elapsed := time.Since(start)
	logins := iss.count()
	// One login before; then at most one per backoff period (100 ms at the
	// most, 50 at the least), and two to notice.
	if maxLogins := 3 + int(elapsed/(50*time.Millisecond)) + 1; logins > maxLogins {
		t.Errorf("%d logins in %v of outage, want at most %d: the handler must back off", logins, elapsed, maxLogins)
	}
	if loginErrors == 0 {
		t.Errorf("no LoginError during the outage (%d 401s)", unauthorized)
	}
	srv.down.Store(false)
	recovered := time.Now()
	// Served again within the backoff's most (100 ms) and the time a
	// request takes: bounded by eventually's hang bound, which is well
	// under the default backoff's most (1 min), so a vault that forgot the
	// handler's own backoff would fail it.
	eventually(t, "the vault to serve again", func() bool {
		resp, err := (&http.Client{Transport: v.Transport()}).Get(srv.URL() + "/x")
		if err != nil {
			return false // a LoginError while the handler still backs off
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	t.Logf("outage: %d LoginErrors, %d 401s, %d logins in %v; served again %v after it", loginErrors, unauthorized, logins, elapsed, time.Since(recovered))
}

// A request that brings its own Authorization for server a is sent to a,
// never rerouted to the server of the credential the vault selected: b
// must not receive a's token.
func TestOwnAuthorizationKeepsItsHost(t *testing.T) {
	ca := testpki.NewCA(t)
	a := newAPIServer(t, ca, nil, "")
	b := newAPIServer(t, ca, nil, "/k8s/clusters/c-1")
	a.allow("token-a")
	b.allow("token-b")
	a.allow("callers-own")
	v := New(Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: a.URL(), CAData: ca.PEM, Token: "token-a"}), login.ID("a"))
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: b.URL(), CAData: ca.PEM, Token: "token-b"}), login.ID("b"))
	mustSelect(t, v)
	eventually(t, "both credentials", func() bool { return v.snap.Load().size() == 2 })
	for range 40 {
		req, _ := http.NewRequest(http.MethodGet, a.URL()+"/api/v1/namespaces", nil)
		req.Header.Set("Authorization", "Bearer callers-own")
		if status, body := send(t, v, req); status != 200 {
			t.Fatalf("GET with an own token = %d %s", status, body)
		}
	}
	for _, r := range b.seen() {
		t.Errorf("server b saw %s with %q: a request with its own Authorization was rerouted", r.Path, r.Auth)
	}
	if n := len(a.seen()); n != 40 {
		t.Errorf("server a saw %d requests, want 40", n)
	}
	for _, r := range a.seen() {
		if r.Auth != "Bearer callers-own" {
			t.Errorf("server a saw %q, want the caller's own header", r.Auth)
		}
	}
}

// Close closes the idle connections at once and the others as soon as the
// last response on them finishes: a watch running at Close goes on, and
// its connection closes when it ends, not at the idle timeout.
func TestCloseClosesConnectionsOnceTheirResponsesFinish(t *testing.T) {
	for _, http2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("http2=%v", http2), func(t *testing.T) {
			ca := testpki.NewCA(t)
			srv := newAPIServer(t, ca, nil, "")
			if !http2 {
				srv.srv.Close()
				srv.srv = httptest.NewUnstartedServer(srv.srv.Config.Handler)
				srv.srv.TLS = ca.ServerTLS(t, "api", nil)
				srv.srv.TLS.NextProtos = []string{"http/1.1"}
				srv.srv.StartTLS()
				t.Cleanup(srv.srv.Close)
			}
			srv.allow("t")
			v := New(Options{NoFallback: true})
			defer v.Close()
			v.OnLogin(handlerOf(login.ConnectionInfo{Server: srv.URL(), CAData: ca.PEM, Token: "t"}))
			client := &http.Client{Transport: v.Transport()}
			resp, err := client.Get(srv.URL() + "/api/v1/watch")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("watch = %v %v", resp, err)
			}
			defer resp.Body.Close()
			if status, _ := get(t, v, srv.URL()+"/x"); status != 200 { // another, finished
				t.Fatal("GET failed")
			}
			if resp.ProtoMajor != 2 == http2 {
				t.Fatalf("watch over %s, want http2=%v", resp.Proto, http2)
			}
			open := func() int64 {
				live, retired := v.pool.openConns()
				return live + retired
			}
			lines := bufio.NewScanner(resp.Body)
			lines.Scan()

			v.Close()
			for range 5 {
				if !lines.Scan() {
					t.Fatalf("the watch ended at Close: %v", lines.Err())
				}
			}
			if open() == 0 {
				t.Fatal("Close closed the connection of a running watch")
			}
			resp.Body.Close()
			eventually(t, "every connection to close", func() bool { return open() == 0 })
		})
	}
}

// A handler that reissues its client certificate never brings the old one
// back: the old certificate's connections close at the next sweep, not
// after the grace kept for a re-login with the same identity (a minute by
// default; the fleet benchmark found six connections per cluster open 40 s
// after five reissues).
func TestReissuedCertificateSkipsTheGrace(t *testing.T) {
	serverCA, clientCA := testpki.NewCA(t), testpki.NewCA(t)
	srv := newAPIServer(t, serverCA, clientCA, "")
	srv.allowCert("operator")
	v := New(Options{TransportGrace: time.Hour})
	defer v.Close()
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		cert, key := clientCA.Issue(t, "operator", false) // a new identity on each login
		return &login.ConnectionInfo{Server: srv.URL(), CAData: serverCA.PEM, CertificateData: cert, PrivateKeyData: key,
			Expiration: time.Now().Add(time.Hour)}, nil
	}, login.ID("cert"), login.Backoff(time.Millisecond, time.Second))
	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
		t.Fatal("GET with the first certificate failed")
	}
	first := mustSelect(t, v)
	v.Refresh()
	eventually(t, "the reissued certificate", func() bool { return mustSelect(t, v) != first })
	if status, _ := get(t, v, srv.URL()+"/x"); status != 200 {
		t.Fatal("GET with the reissued certificate failed")
	}
	eventually(t, "the old certificate's connection to close", func() bool {
		live, retired := v.pool.openConns()
		return live == 1 && retired == 0
	})
}
