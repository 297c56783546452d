package addonauth

import (
	"crypto/tls"
	"crypto/x509"
	"runtime"
	"sync"
	"time"
	"weak"
)

// verifiedConns remembers the TLS connections whose client certificate
// verified as a front proxy's, so that the chain is checked once per
// connection and CA, not once per request: the aggregator keeps its
// connections alive, and the chain check was nearly all of a front-proxy
// request's cost (k8s.io/apiserver checks it on every request).
//
// A connection is known by its *tls.ConnectionState, which net/http's
// servers (HTTP/1 and HTTP/2) make once per connection and hand to each of
// its requests. An entry serves only while the CA generation it was
// verified under is in force (a CA removed, or names changed, make a new
// one: the connection's next request is checked again) and until the
// earliest expiry in its chain; it is dropped when the connection state is
// collected.
type verifiedConns struct {
	entries sync.Map // weak.Pointer[tls.ConnectionState] → verifiedConn
}

// verifiedConn is what a connection's check found.
type verifiedConn struct {
	leaf  *x509.Certificate // the certificate checked: the connection's own
	gen   caGeneration      // the configuration it was checked under
	until time.Time         // the chain's earliest NotAfter
}

// caGeneration names the configuration a chain was checked under: the
// state in force (a ConfigMap's version: its CA, names and headers) and
// the CA pool (a CA file reread in place changes only that).
type caGeneration struct {
	state *frontProxyState
	roots *x509.CertPool
}

// verified tells whether cs's certificate verified under gen and is
// still within its chain's validity at now.
func (v *verifiedConns) verified(cs *tls.ConnectionState, gen caGeneration, now time.Time) bool {
	e, ok := v.entries.Load(weak.Make(cs))
	if !ok {
		return false
	}
	c := e.(verifiedConn)
	return c.gen == gen && c.leaf == cs.PeerCertificates[0] && now.Before(c.until)
}

// remember notes that cs's certificate verified under gen, with opts
// (those of the check), for as long as its chain is valid.
func (v *verifiedConns) remember(cs *tls.ConnectionState, gen caGeneration, opts x509.VerifyOptions) {
	until, ok := chainExpiry(cs.PeerCertificates, opts)
	if !ok {
		return
	}
	key := weak.Make(cs)
	if _, loaded := v.entries.Swap(key, verifiedConn{leaf: cs.PeerCertificates[0], gen: gen, until: until}); !loaded {
		runtime.AddCleanup(cs, func(k weak.Pointer[tls.ConnectionState]) { v.entries.Delete(k) }, key)
	}
}

// chainExpiry is the earliest NotAfter of the chains the certificates
// verify with under opts (the roots' too): past it, the check would fail.
func chainExpiry(certs []*x509.Certificate, opts x509.VerifyOptions) (time.Time, bool) {
	if opts.Intermediates == nil && len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	chains, err := certs[0].Verify(opts)
	if err != nil {
		return time.Time{}, false
	}
	var until time.Time
	for _, chain := range chains {
		for _, c := range chain {
			if until.IsZero() || c.NotAfter.Before(until) {
				until = c.NotAfter
			}
		}
	}
	return until, !until.IsZero()
}
