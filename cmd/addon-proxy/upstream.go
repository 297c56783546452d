package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"

	"github.com/go-logr/logr"
)

// newProxy forwards to upstream through transport. With a prefix (an
// APIService's), the upstream's redirects are kept under it, as pages
// that send the browser on (see sendOn).
func newProxy(upstream *url.URL, prefix string, transport http.RoundTripper, log logr.Logger) *httputil.ReverseProxy {
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.SetXForwarded()
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if g, ok := r.Context().Value(formGuardKey{}).(*formGuard); ok && g.refused() {
				refuseOverride(log, w, r, "form body", overrideRefusal(r.Method))
				return
			}
			if r.Context().Err() == nil {
				log.Error(err, "forwarding", "path", r.URL.Path)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	if prefix != "" {
		p.ModifyResponse = func(resp *http.Response) error {
			sendOn(resp, prefix, upstream)
			return nil
		}
	}
	return p
}

// upstreamTransport reaches the upstream: trusting --upstream-ca-file for
// an https one and presenting --upstream-client-cert-file to it (reread
// when the files change, for the connections made after), speaking h2c
// with --upstream-force-h2c. It never goes through an HTTP proxy from the
// environment: the requests carry the callers' identities, for the
// service beside the sidecar only.
func upstreamTransport(c config, log logr.Logger) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	if c.upstreamCAFile != "" || c.upstreamCertFile != "" {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if c.upstreamCAFile != "" {
		pem, err := os.ReadFile(c.upstreamCAFile)
		if err != nil {
			return nil, fmt.Errorf("--upstream-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--upstream-ca-file %s holds no PEM certificate", c.upstreamCAFile)
		}
		t.TLSClientConfig.RootCAs = pool
	}
	if c.upstreamCertFile != "" {
		certs := &certReloader{certFile: c.upstreamCertFile, keyFile: c.upstreamKeyFile, what: "upstream client certificate", log: log}
		if _, err := certs.load(); err != nil {
			return nil, err
		}
		t.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return certs.load() }
	}
	if c.upstreamH2C {
		// HTTP/2 only, with prior knowledge: no HTTP/1.1 Upgrade, which
		// h2c-only servers (gRPC without TLS) do not answer.
		t.Protocols = new(http.Protocols)
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	return t, nil
}
