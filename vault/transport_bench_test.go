package vault

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// noop is the base round tripper of the in-memory comparison: it answers
// at once with a shared response, so only the authenticating layer is
// measured.
type noop struct{ resp *http.Response }

func (n noop) RoundTrip(*http.Request) (*http.Response, error) { return n.resp, nil }

const benchServer = "https://api.example:6443"

func benchRequest(b *testing.B, server string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, server+"/api/v1/namespaces/default/pods", nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

// vaultOver is a vault with one token credential whose transport is base.
func vaultOver(b *testing.B, base http.RoundTripper, info login.ConnectionInfo) *Vault {
	v := New(Options{})
	b.Cleanup(v.Close)
	if base != nil {
		v.pool.build = func(identity, *tls.Config) (*pooled, error) { return &pooled{rt: base}, nil }
	}
	v.OnLogin(handlerOf(info))
	if _, err := v.Select(context.Background()); err != nil {
		b.Fatal(err)
	}
	return v
}

func roundTrip(b *testing.B, rt http.RoundTripper, req *http.Request) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.Body != http.NoBody {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

func runRoundTrips(b *testing.B, rt http.RoundTripper, req *http.Request, parallel bool) {
	b.ReportAllocs()
	if !parallel {
		for b.Loop() {
			roundTrip(b, rt, req)
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			roundTrip(b, rt, req)
		}
	})
}

// BenchmarkTransport compares the vault's transport with client-go's bearer
// token round tripper, over the same no-op base and over a loopback TLS
// server (HTTP/2).
func BenchmarkTransport(b *testing.B) {
	for _, mode := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run("noop/client-go/"+mode.name, func(b *testing.B) {
			base := noop{&http.Response{StatusCode: 200, Body: http.NoBody}}
			rt := transport.NewBearerAuthRoundTripper("token", base)
			runRoundTrips(b, rt, benchRequest(b, benchServer), mode.parallel)
		})
		b.Run("noop/vault/"+mode.name, func(b *testing.B) {
			base := noop{&http.Response{StatusCode: 200, Body: http.NoBody}}
			v := vaultOver(b, base, login.ConnectionInfo{Server: benchServer, Token: "token"})
			runRoundTrips(b, v.Transport(), benchRequest(b, benchServer), mode.parallel)
		})
	}

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","items":[]}`)
	}))
	ca := testpki.NewCA(b)
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // concurrent first dials race; one loses
	srv.TLS = ca.ServerTLS(b, "api", nil)
	srv.StartTLS()
	b.Cleanup(srv.Close)
	for _, mode := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run("tls/client-go/"+mode.name, func(b *testing.B) {
			rt, err := rest.TransportFor(&rest.Config{Host: srv.URL, BearerToken: "token", TLSClientConfig: rest.TLSClientConfig{CAData: ca.PEM}})
			if err != nil {
				b.Fatal(err)
			}
			runRoundTrips(b, rt, benchRequest(b, srv.URL), mode.parallel)
		})
		b.Run("tls/vault/"+mode.name, func(b *testing.B) {
			v := vaultOver(b, nil, login.ConnectionInfo{Server: srv.URL, CAData: ca.PEM, Token: "token"})
			runRoundTrips(b, v.Transport(), benchRequest(b, srv.URL), mode.parallel)
		})
	}
}
