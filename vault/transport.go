package vault

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// maxAttempts bounds how often one request is sent, whatever happens.
const maxAttempts = 8

// Transport returns the vault's http.RoundTripper. For each request it
// selects a credential (waiting while the vault logs in, within the
// request's context and Options.MaxWait), routes the request to that credential's server,
// authenticates it and sends it over the transport of the credential's TLS
// identity. On a 401 it invalidates the credential and, when the request can
// be replayed (no body, or GetBody), sends it again with the next credential,
// through at most one login.
//
// A request that carries its own Authorization header is sent to the server
// it names, with the TLS settings of a credential for that server but no
// credential, and its 401 invalidates nothing. A request for a URL that is
// not below a server the vault knows (a redirect to another host), whose
// path climbs out of its server's path prefix once dot segments are
// resolved, or that has an opaque part (URL.Opaque, which names the target
// whatever Host and Path say), is sent with no credential at all.
func (v *Vault) Transport() http.RoundTripper { return (*roundTripper)(v) }

type roundTripper Vault

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	v := (*Vault)(t)
	ownAuth := hasAuthorization(req.Header)
	relogged := false
	for attempt := 1; ; attempt++ {
		cred, err := v.Select(req.Context())
		if err != nil {
			closeBody(req)
			return nil, err
		}
		out, rt, carriesCred := v.prepare(req, cred, ownAuth)
		if attempt > 1 && req.GetBody != nil {
			if out.Body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("vault: replaying the request body: %w", err)
			}
		}
		resp, err := rt.RoundTrip(out)
		if err != nil && carriesCred && isTLSFailure(err) {
			v.invalidate(req.Context(), cred, &TLSError{Server: cred.Info.Server, Err: err}, byTLSFailure)
		}
		if err != nil || !carriesCred {
			return resp, err
		}
		if resp.StatusCode != http.StatusUnauthorized {
			v.served(cred)
			return resp, nil
		}
		v.invalidate(req.Context(), cred, unauthorized(cred, resp), by401)
		// The next Select logs in when no credential is left; one login per
		// request at most.
		needsLogin := v.snap.Load().pick() == nil
		if !replayable(req) || attempt >= maxAttempts || (needsLogin && relogged) {
			return resp, nil
		}
		relogged = relogged || needsLogin
		discard(resp)
		v.metrics.retries.Inc()
	}
}

// prepare makes the request to send with cred, and picks the round tripper.
// carriesCred tells whether the request carries cred's authentication, so
// that its 401 condemns cred. A request for a URL the vault does not know
// gets no credential; neither does one whose path, once cleaned, leaves its
// server's path prefix. A request that brings its own Authorization is sent
// to the server it names, never rerouted to the credential's.
func (v *Vault) prepare(req *http.Request, cred *Credential, ownAuth bool) (out *http.Request, rt http.RoundTripper, carriesCred bool) {
	r := cred.route
	out = utilnet.CloneRequest(req)
	b, rel, known := v.match(req.URL)
	switch {
	case !known:
		return out, v.pool.plain(), false
	case ownAuth:
		return out, v.ownAuthTransport(b, r), false
	case b != r.base:
		out.URL = r.target(req.URL, rel)
		out.Host = "" // from the new URL
		if _, below := r.base.relative(out.URL); !below {
			return out, v.pool.plain(), false
		}
	}
	if r.auth != nil {
		out.Header["Authorization"] = r.auth
	}
	return out, r.rt, true
}

// hasAuthorization tells whether h carries an Authorization header under
// any spelling of its key: a Header built as a literal, or copied from
// HTTP/2, may hold "authorization", which Header.Get does not find but
// net/http sends all the same.
func hasAuthorization(h http.Header) bool {
	if len(h["Authorization"]) > 0 {
		return true
	}
	for k, vs := range h {
		if len(k) == len("Authorization") && len(vs) > 0 && strings.EqualFold(k, "Authorization") {
			return true
		}
	}
	return false
}

// ownAuthTransport is the round tripper for a request below b that brings
// its own Authorization: the TLS identity of a credential for b, without
// its client certificate and token, or the plain transport (the system's roots) when
// the vault holds no such credential for b. The selected credential r is
// the likely one.
func (v *Vault) ownAuthTransport(b base, r *route) http.RoundTripper {
	if r.base != b {
		r = v.snap.Load().routeFor(b)
	}
	if r == nil || r.bare == nil {
		// No credential for b, or one with its own Transport, which may
		// add its own authentication (a client certificate, an auth
		// provider's token, impersonation): the caller's Authorization
		// must be the only one.
		return v.pool.plain()
	}
	return r.bare
}

// match finds the known server that u is below, the one with the longest
// path prefix, and u's path below it.
func (v *Vault) match(u *url.URL) (base, string, bool) {
	for _, b := range *v.bases.Load() { // longest prefix first
		if rel, ok := b.relative(u); ok {
			return b, rel, true
		}
	}
	return base{}, "", false
}

func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// discard drains a little of a response that is not returned, so that its
// connection can serve the retry, and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil { // a credential's own Transport may break the RoundTripper contract
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}
