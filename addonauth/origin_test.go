package addonauth

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/authvault/authvault/testkit/testpki"
)

// wsUpstream is a service with a WebSocket that tells its caller who it
// is: what a page of another site must never read.
type wsUpstream struct{ upgrades atomic.Int64 }

func (u *wsUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }} // the middleware checks origins
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	u.upgrades.Add(1)
	_ = conn.WriteMessage(websocket.TextMessage, []byte("secrets of "+r.Header.Get("X-Authenticated-User")))
	_, _, _ = conn.ReadMessage() // until the caller closes
}

// wsSetup is the middleware with a front proxy in front of wsUpstream, on
// TLS that asks for client certificates, as addon-proxy serves it.
func wsSetup(t *testing.T, opts Options) (*frontSetup, *wsUpstream, *testpki.CA) {
	t.Helper()
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM)}, opts)
	up := &wsUpstream{}
	s.srv.Config.Handler = s.auth.Middleware(up)
	return s, up, proxyCA
}

// dialWS opens a WebSocket to s with headers, over TLS with a
// certificate of ca when ca is not nil, and returns the first message, or
// the status the handshake got and its body.
func dialWS(t *testing.T, s *frontSetup, ca *testpki.CA, headers http.Header) (status int, got string) {
	t.Helper()
	cfg := &tls.Config{RootCAs: s.ca.Pool}
	if ca != nil {
		certPEM, keyPEM := ca.Issue(t, "front-proxy-client", false)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	d := websocket.Dialer{TLSClientConfig: cfg, HandshakeTimeout: time.Minute}
	conn, resp, err := d.Dial("wss"+strings.TrimPrefix(s.srv.URL, "https")+"/feed", headers)
	if err != nil {
		if resp == nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a hang, not the machine's speed
	_, msg, err := conn.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	return http.StatusSwitchingProtocols, string(msg)
}

func with(h http.Header, kv ...string) http.Header {
	h = h.Clone()
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// A WebSocket's handshake is a GET that no same-origin policy guards: a
// page of another site that opens one through kubectl proxy would read
// what the service tells the person. It gets 403 and never reaches the
// service, by Sec-Fetch-Site or, from a browser without it, by Origin;
// the same origin, a trusted one and a program (neither header) are
// served.
func TestCrossOriginWebSocketIsRefused(t *testing.T) {
	s, up, proxyCA := wsSetup(t, Options{TrustedOrigins: []string{"HTTP://LocalHost:8001"}})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	bearer := http.Header{"Authorization": {"Bearer " + tok}}
	for _, tc := range []struct {
		name    string
		ca      *testpki.CA
		headers http.Header
		want    int
	}{
		{"front proxy, cross-site", proxyCA, with(aggregator, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"), 403},
		{"front proxy, same site, another origin", proxyCA, with(aggregator, "Sec-Fetch-Site", "same-site", "Origin", "http://localhost:9999"), 403},
		{"front proxy, Origin alone", proxyCA, with(aggregator, "Origin", "https://evil.example"), 403},
		{"front proxy, Origin null", proxyCA, with(aggregator, "Origin", "null"), 403},
		{"bearer, cross-site", nil, with(bearer, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"), 403},
		{"bearer, Origin alone", nil, with(bearer, "Origin", "https://evil.example"), 403},
		{"front proxy, same origin", proxyCA, with(aggregator, "Sec-Fetch-Site", "same-origin", "Origin", "http://localhost:8001"), 101},
		{"front proxy, trusted origin", proxyCA, with(aggregator, "Sec-Fetch-Site", "cross-site", "Origin", "http://localhost:8001"), 101},
		{"front proxy, a program", proxyCA, aggregator, 101},
		{"bearer, a program", nil, bearer, 101},
	} {
		before := up.upgrades.Load()
		status, got := dialWS(t, s, tc.ca, tc.headers)
		reached := up.upgrades.Load() > before
		if status != tc.want || reached != (tc.want == 101) {
			t.Errorf("%s: %d %q, upstream reached %v; want %d", tc.name, status, got, reached, tc.want)
		}
		if tc.want == 101 && !strings.HasPrefix(got, "secrets of ") {
			t.Errorf("%s: the service said %q", tc.name, got)
		}
		if tc.want == 403 && strings.Contains(got, "secrets") {
			t.Errorf("%s: the refusal holds the service's answer: %q", tc.name, got)
		}
	}
}

// Any upgrade, however a handshake spells it, is checked as an unsafe
// request; a safe request from another site is served unless its answer
// would become part of the page (a frame, a script); and a POST from
// another site is refused by the middleware itself, not only by
// addon-proxy.
func TestCrossOriginUpgradesAndUnsafeRequestsInTheMiddleware(t *testing.T) {
	s := newSetup(t, Options{})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	for _, tc := range []struct {
		name, method string
		headers      http.Header
		want         int
	}{
		{"Upgrade alone", "GET", http.Header{"Upgrade": {"websocket"}}, 403},
		{"Connection: Upgrade alone", "GET", http.Header{"Connection": {"keep-alive, Upgrade"}}, 403},
		{"another protocol", "GET", http.Header{"Upgrade": {"h2c"}, "Connection": {"Upgrade"}}, 403},
		{"Sec-WebSocket-Key alone", "GET", http.Header{"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}, 403},
		{"Sec-Fetch-Mode websocket", "GET", http.Header{"Sec-Fetch-Mode": {"websocket"}}, 403},
		{"a HEAD handshake", "HEAD", http.Header{"Upgrade": {"websocket"}}, 403},
		{"a POST", "POST", nil, 403},
		{"a DELETE", "DELETE", nil, 403},
		{"a frame", "GET", http.Header{"Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Dest": {"iframe"}}, 403},
		{"a script", "GET", http.Header{"Sec-Fetch-Mode": {"no-cors"}, "Sec-Fetch-Dest": {"script"}}, 403},
		{"a worker", "GET", http.Header{"Sec-Fetch-Mode": {"same-origin"}, "Sec-Fetch-Dest": {"worker"}}, 403},
		{"a fetch: served, kept from the page", "GET", http.Header{"Sec-Fetch-Mode": {"cors"}, "Sec-Fetch-Dest": {"empty"}}, 200},
		{"a CORS preflight", "OPTIONS", http.Header{"Sec-Fetch-Mode": {"cors"}, "Access-Control-Request-Method": {"DELETE"}}, 200},
		{"an image", "GET", http.Header{"Sec-Fetch-Mode": {"no-cors"}, "Sec-Fetch-Dest": {"image"}}, 200},
		{"a GET of a browser that says no more", "GET", nil, 200},
		{"a link followed", "GET", http.Header{"Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Dest": {"document"}}, 200},
		{"a link followed, HEAD", "HEAD", http.Header{"Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Dest": {"document"}}, 200},
	} {
		req, _ := http.NewRequest(tc.method, s.srv.URL+"/hello", nil)
		for k, v := range tc.headers {
			req.Header[k] = v
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://evil.example")
		before := s.up.count()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want || (s.up.count() > before) != (tc.want == 200) {
			t.Errorf("%s: %d, upstream reached %v; want %d", tc.name, resp.StatusCode, s.up.count() > before, tc.want)
		}
	}
}

// The page a refused person reads says what happened, which page it came
// from and which setting would trust it; the log says so once at INFO for
// a burst (each at V(1)), without the cookie or token the browser sent.
func TestCrossOriginRefusalSaysWhatToDo(t *testing.T) {
	s := newSetup(t, Options{TrustedOriginsSetting: "addon-proxy --trusted-origins"})
	// A refused token just before: the person's refusal still gets its
	// own line at once.
	if resp, _ := s.get(t, "garbage", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a garbage token: %d", resp.StatusCode)
	}
	for range 5 {
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/notes", strings.NewReader("text=x"))
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://evil.example")
		req.Header.Set("Cookie", "session=COOKIE-SECRET")
		req.Header.Set("Authorization", "Bearer TOKEN-SECRET")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%d %v", resp.StatusCode, resp.Header)
		}
		for _, want := range []string{"cross-origin", "https://evil.example", "Sec-Fetch-Site: cross-site", "send this service a POST", "add its origin to addon-proxy --trusted-origins"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("the page does not say %q:\n%s", want, body)
			}
		}
	}
	logs := s.logs.String()
	if n := strings.Count(logs, `"level"=0 "msg"="cross-origin requests from browsers refused`); n != 1 {
		t.Errorf("%d INFO lines for a burst of 5 refusals, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs, `"msg"="cross-origin request refused"`); n != 5 {
		t.Errorf("%d V(1) lines for 5 refusals, want 5:\n%s", n, logs)
	}
	if !strings.Contains(logs, `"crossOrigin"=1`) || !strings.Contains(logs, "evil.example") {
		t.Errorf("the INFO line does not count the refusal or name the origin:\n%s", logs)
	}
	for _, secret := range []string{"COOKIE-SECRET", "TOKEN-SECRET"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %s:\n%s", secret, logs)
		}
	}
}

// An origin no browser sends is refused by New, naming the option.
func TestTrustedOriginsAreChecked(t *testing.T) {
	api := newFakeAPI(t)
	for _, bad := range []string{"localhost:8001", "http://localhost:8001/", "ftp://x", "http://user@x"} {
		if _, err := New(Options{Audience: audience, Config: api.config(), TrustedOrigins: []string{bad}}); err == nil || !strings.Contains(err.Error(), "Options.TrustedOrigins") {
			t.Errorf("%q: %v, want an error naming Options.TrustedOrigins", bad, err)
		}
	}
}

// A front-proxy caller's method is the one the API server authorized (a
// POST as create): an override of it, in any spelling, gets 403 and never
// reaches the service, without Authorization too.
func TestFrontProxyMethodOverrideIsRefused(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM)}, Options{})
	client := s.client(t, proxyCA, "front-proxy-client")
	post := func(query string, h http.Header) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/notes"+query, strings.NewReader("text=x"))
		for k, v := range aggregator {
			req.Header[k] = v
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		query string
		h     http.Header
	}{
		{"", http.Header{"X-Http-Method-Override": {"DELETE"}}},
		{"", http.Header{"X-Http-Method": {"DELETE"}}},
		{"", http.Header{"X-Method-Override": {"DELETE"}}},
		{"", http.Header{"X_http_method_override": {"DELETE"}}},
		{"?_method=DELETE", nil},
		{"?%5Fmethod=DELETE", nil},
		{"?.method=DELETE", nil},
		{"?_method[]=DELETE", nil},
		{"?a=1&_METHOD=delete", nil},
	} {
		before := s.up.count()
		if got := post(tc.query, tc.h); got != http.StatusForbidden || s.up.count() != before {
			t.Errorf("POST %q %v: %d, reached %v; want 403", tc.query, tc.h, got, s.up.count() != before)
		}
	}
	if got := post("?method=x&x_method=y", nil); got != 200 {
		t.Errorf("a POST with no override: %d, want 200", got)
	}
}

// Any hop may join a header's values with commas: a value holding one
// could be read as two (a group "viewers,system:masters" as viewers and
// system:masters). Such an identity is refused, from a front proxy and
// from a TokenReview alike, and never forwarded.
func TestIdentityWithACommaIsRefused(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM), ExtraHeaderPrefixes: []string{"X-Remote-Extra-"}}, Options{})
	client := s.client(t, proxyCA, "front-proxy-client")
	for name, h := range map[string]http.Header{
		"group": {"X-Remote-User": {"alice"}, "X-Remote-Group": {"viewers,system:masters"}},
		"user":  {"X-Remote-User": {"alice,admin"}},
		"extra": {"X-Remote-User": {"alice"}, "X-Remote-Extra-Scopes": {"read,write"}},
	} {
		before := s.up.count()
		if resp, _ := s.get(t, client, h); resp.StatusCode != http.StatusForbidden || s.up.count() != before {
			t.Errorf("front proxy, a %s with a comma: %d, reached %v; want 403", name, resp.StatusCode, s.up.count() != before)
		}
	}
	if resp, _ := s.get(t, client, http.Header{"X-Remote-User": {"alice"}, "X-Remote-Group": {"viewers", "system:authenticated"}}); resp.StatusCode != 200 {
		t.Errorf("front proxy, groups in separate values: %d, want 200", resp.StatusCode)
	}

	b := newSetup(t, Options{ReviewForeign: true})
	b.api.accept("opaque-token", authnv1.UserInfo{Username: "dave", Groups: []string{"viewers,system:masters"}})
	resp, body := b.get(t, "opaque-token", nil)
	if resp.StatusCode != http.StatusForbidden || b.up.count() != 0 {
		t.Errorf("bearer, a group with a comma: %d, reached %v; want 403", resp.StatusCode, b.up.count() != 0)
	}
	if !strings.Contains(body, "comma") {
		t.Errorf("the refusal does not say why: %q", body)
	}
}

// An override announced as a trailer is one too: servers that merge
// trailers into headers read it.
func TestFrontProxyMethodOverrideInATrailerIsRefused(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM)}, Options{})
	client := s.client(t, proxyCA, "front-proxy-client")
	for _, name := range []string{"X-Http-Method-Override", "X-Method-Override"} {
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/notes", io.MultiReader(strings.NewReader("text=x"))) // chunked, with trailers
		for k, v := range aggregator {
			req.Header[k] = v
		}
		req.Trailer = http.Header{name: {"DELETE"}}
		before := s.up.count()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || s.up.count() != before {
			t.Errorf("POST with trailer %s: DELETE: %d, reached %v; want 403", name, resp.StatusCode, s.up.count() != before)
		}
	}
}

// Whatever the upstream's CORS headers, another site's fetch gets its
// answer without them, so the browser keeps it from the page; its frame
// or script gets 403; a link from it, the same origin's fetch and a
// trusted origin's keep the upstream's headers; so does a program's.
func TestCrossSiteReadsAreKeptFromThePage(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM)}, Options{TrustedOrigins: []string{"https://dash.example"}})
	s.srv.Config.Handler = s.auth.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*") // a permissive upstream, as Prometheus is
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.(http.Flusher).Flush() // the headers go out before the body: stripped all the same
		_, _ = w.Write([]byte("secrets of " + r.Header.Get("X-Authenticated-User")))
	}))
	client := s.client(t, proxyCA, "front-proxy-client")
	const (
		kept     = "served, kept from the page"
		readable = "served as the upstream answers"
		refused  = "refused"
	)
	for _, tc := range []struct {
		name    string
		headers http.Header
		want    string
	}{
		{"a fetch", with(aggregator, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"), kept},
		{"a fetch of the same site", with(aggregator, "Sec-Fetch-Site", "same-site", "Origin", "http://localhost:9999", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"), kept},
		{"a fetch of a browser without fetch metadata", with(aggregator, "Origin", "https://evil.example"), kept},
		{"a link followed", with(aggregator, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"), kept},
		{"a frame", with(aggregator, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"), refused},
		{"a script", with(aggregator, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "script"), refused},
		{"the same origin's fetch", with(aggregator, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty"), readable},
		{"a trusted origin's fetch", with(aggregator, "Sec-Fetch-Site", "cross-site", "Origin", "https://dash.example", "Sec-Fetch-Mode", "cors"), readable},
		{"a program", aggregator, readable},
	} {
		resp, body := s.get(t, client, tc.headers)
		var got string
		switch {
		case resp.StatusCode == http.StatusForbidden && !strings.Contains(body, "secrets"):
			got = refused
		case resp.StatusCode == 200 && resp.Header.Get("Access-Control-Allow-Origin") == "" && resp.Header.Get("Access-Control-Allow-Credentials") == "":
			got = kept
		case resp.StatusCode == 200 && resp.Header.Get("Access-Control-Allow-Origin") == "*":
			got = readable
		default:
			got = fmt.Sprintf("%d %v %q", resp.StatusCode, resp.Header, body)
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A frame or a script carries no Origin: the page says to open the
// service directly, not to trust an origin, which would change nothing.
func TestCrossOriginAdviceFitsTheRequest(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	s := newFrontSetup(t, FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM)}, Options{TrustedOrigins: []string{"https://dash.example"}})
	client := s.client(t, proxyCA, "front-proxy-client")
	frame := with(aggregator, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe", "Referer", "https://dash.example/")
	resp, body := s.get(t, client, frame)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "add its origin") || !strings.Contains(body, "open it directly") {
		t.Errorf("a frame: %d %q, want 403 saying to open the service directly", resp.StatusCode, body)
	}
}
