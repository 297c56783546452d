package addonauth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testpki"
)

// BenchmarkFrontProxy compares, in one run and in process, a request a
// front proxy vouches for with a bearer request whose review is cached,
// through the middleware, and k8s.io/apiserver's requestheader
// authenticator alone (what every aggregated API server runs per request,
// the certificate's chain check among it). It reports the API calls per
// 10,000 requests (the goal for a front-proxy caller is none):
//
//	go test -run '^$' -bench FrontProxy -benchmem ./addonauth
func BenchmarkFrontProxy(b *testing.B) {
	api, proxyCA, a := benchFrontProxy(b)
	certPEM, _ := proxyCA.Issue(b, "front-proxy-client", false)
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		b.Fatal(err)
	}
	tok := api.token(b, "team-a", "client", audience, time.Hour)
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mw := a.Middleware(ok)
	request := func(front bool) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "https://dashboard/notes", nil)
		if front {
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
			r.Header = aggregator.Clone()
		} else {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		return r
	}
	// Warm: the bearer token's review is cached from here on.
	warm := httptest.NewRecorder()
	if mw.ServeHTTP(warm, request(false)); warm.Code != 200 {
		b.Fatalf("warm-up: %d", warm.Code)
	}
	calls := func() int64 {
		return api.reviews.Load() + api.keyFetches.Load() + api.accessReviews.Load() + api.discoveries.Load()
	}
	for _, bc := range []struct {
		name  string
		front bool
		serve func(*http.Request) int
	}{
		{"bearer, cached review", false, func(r *http.Request) int { w := httptest.NewRecorder(); mw.ServeHTTP(w, r); return w.Code }},
		{"front proxy", true, func(r *http.Request) int { w := httptest.NewRecorder(); mw.ServeHTTP(w, r); return w.Code }},
		{"k8s.io/apiserver requestheader alone", true, func(r *http.Request) int {
			if _, ok, err := a.front.auth.AuthenticateRequest(r); !ok || err != nil {
				return 401
			}
			return 200
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := request(bc.front)
			header := r.Header
			before := calls()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r.Header = header.Clone() // the requestheader authenticator removes what it read
				if code := bc.serve(r); code != 200 {
					b.Fatalf("answered %d", code)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(calls()-before)*10_000/float64(b.N), "apicalls/10k")
		})
	}
}

// BenchmarkFrontProxyOverTLS is BenchmarkFrontProxy over a real TLS
// connection on loopback, kept alive as the aggregator keeps its own, in
// one run: the request's whole cost at the server, its client's and the
// network's, for a cached bearer request and a front-proxy one.
//
//	go test -run '^$' -bench FrontProxyOverTLS -benchmem ./addonauth
func BenchmarkFrontProxyOverTLS(b *testing.B) {
	api, proxyCA, a := benchFrontProxy(b)
	serverCA := testpki.NewCA(b)
	srv := httptest.NewUnstartedServer(a.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	srv.TLS = serverCA.ServerTLS(b, "addon-proxy", nil)
	srv.TLS.ClientAuth = tls.RequestClientCert
	srv.StartTLS()
	defer srv.Close()
	certPEM, keyPEM := proxyCA.Issue(b, "front-proxy-client", false)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: serverCA.Pool, Certificates: []tls.Certificate{pair}}, MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	tok := api.token(b, "team-a", "client", audience, time.Hour)
	for _, bc := range []struct {
		name   string
		header http.Header
	}{
		{"bearer, cached review", http.Header{"Authorization": {"Bearer " + tok}}},
		{"front proxy", aggregator},
	} {
		b.Run(bc.name, func(b *testing.B) {
			do := func() {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+"/notes", nil)
				req.Header = bc.header.Clone()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("answered %d", resp.StatusCode)
				}
			}
			do() // the connection, and the review or the chain check, before the timer
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				do()
			}
		})
	}
}

// benchFrontProxy is the benchmarks' API server, front proxy CA and
// Authenticator trusting that CA's front-proxy-client.
func benchFrontProxy(b *testing.B) (*fakeAPI, *testpki.CA, *Authenticator) {
	api := newFakeAPI(b)
	proxyCA := testpki.NewCA(b)
	file := b.TempDir() + "/ca.crt"
	if err := writeFile(file, proxyCA.PEM); err != nil {
		b.Fatal(err)
	}
	a, err := New(Options{Audience: audience, Config: api.config(),
		FrontProxy: &FrontProxy{ClientCAFile: file, AllowedNames: []string{"front-proxy-client"}}})
	if err != nil {
		b.Fatal(err)
	}
	return api, proxyCA, a
}
