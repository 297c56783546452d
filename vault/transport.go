package vault

import (
	"fmt"
	"net/http"
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

// CloseIdleConnections closes the idle connections of every transport the
// vault holds (one per credential's TLS identity, and those of requests it
// sends without a credential), as net/http's Transport does: requests and
// streams in flight keep theirs, and the next request opens a new one. So
// http.Client.CloseIdleConnections and apimachinery's
// utilnet.CloseIdleConnectionsFor close them through the vault's
// Transport, as a program that drops a client expects. A credential's own
// ConnectionInfo.Transport is its owner's to close.
func (t *roundTripper) CloseIdleConnections() { (*Vault)(t).pool.closeIdleConnections() }

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
