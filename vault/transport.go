package vault

import (
	"fmt"
	"io"
	"net/http"
	"net/url"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// maxAttempts bounds how often one request is sent, whatever happens.
const maxAttempts = 8

// UnauthorizedError is why the transport invalidated a credential: the
// server answered 401.
type UnauthorizedError struct {
	Server string
	Status string // "401 Unauthorized"
}

func (e *UnauthorizedError) Error() string {
	return fmt.Sprintf("vault: %s answered %s", e.Server, e.Status)
}

// Transport returns the vault's http.RoundTripper. For each request it
// selects a credential (waiting while the vault logs in, within the
// request's context), routes the request to that credential's server,
// authenticates it and sends it over the transport of the credential's TLS
// identity. On a 401 it invalidates the credential and, when the request can
// be replayed (no body, or GetBody), sends it again with the next credential,
// through at most one login.
//
// A request that carries its own Authorization header is routed but not
// authenticated, and its 401 invalidates nothing. A request for a URL that is
// not below a server the vault knows (a redirect to another host) is sent
// with no credential at all.
func (v *Vault) Transport() http.RoundTripper { return (*roundTripper)(v) }

type roundTripper Vault

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	v := (*Vault)(t)
	ownAuth := req.Header.Get("Authorization") != ""
	relogged := false
	for attempt := 1; ; attempt++ {
		cred, err := v.Select(req.Context())
		if err != nil {
			closeBody(req)
			return nil, err
		}
		out, rt, routed := v.prepare(req, cred, ownAuth)
		if attempt > 1 && req.GetBody != nil {
			if out.Body, err = req.GetBody(); err != nil {
				return nil, fmt.Errorf("vault: replaying the request body: %w", err)
			}
		}
		resp, err := rt.RoundTrip(out)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || !routed || ownAuth {
			if err == nil && routed && !ownAuth && !cred.served.Load() && cred.served.CompareAndSwap(false, true) {
				v.servedFirst(cred)
			}
			return resp, err
		}
		_ = v.Invalidate(req.Context(), cred, &UnauthorizedError{Server: cred.Info.Server, Status: resp.Status})
		if !cred.served.Load() {
			v.rejectedAtOnce(cred)
		}
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

// rejectedAtOnce notes that the server rejected cred before it served a
// single request. The second time in a row for a handler, the handler backs
// off: an authenticator outage or a handler minting bad credentials then
// gives callers a LoginError at once rather than costing a login per request.
// Once is let go: a token can have been revoked before its first use.
func (v *Vault) rejectedAtOnce(cred *Credential) {
	v.mu.Lock()
	defer v.mu.Unlock()
	h := v.lookup(cred.Key)
	if h == nil || v.closed {
		return
	}
	h.rejectedAtOnce++
	if h.rejectedAtOnce < 2 || h.running {
		return
	}
	h.outcome = ErrRejectedAtOnce
	h.retryAt = v.clock.Now().Add(h.backoff.Step())
	v.broadcast()
	v.log.Error(ErrRejectedAtOnce, "login failed", "handler", h.settings.ID, "fingerprint", cred.fingerprint, "retryAt", h.retryAt)
}

// servedFirst notes that cred's handler gives credentials that work.
func (v *Vault) servedFirst(cred *Credential) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if h := v.lookup(cred.Key); h != nil {
		h.rejectedAtOnce = 0
	}
}

// prepare makes the request to send with cred, and picks the round tripper.
// routed is false for a URL the vault does not know: it gets no credential.
func (v *Vault) prepare(req *http.Request, cred *Credential, ownAuth bool) (out *http.Request, rt http.RoundTripper, routed bool) {
	r := cred.route
	out = utilnet.CloneRequest(req)
	b, rel, known := v.match(req.URL)
	if !known {
		return out, v.pool.plain(), false
	}
	if b != r.base() {
		out.URL = r.target(req.URL, rel)
		out.Host = "" // from the new URL
	}
	switch {
	case ownAuth && r.bare != nil:
		return out, r.bare.rt, true
	case ownAuth:
		return out, r.rt, true
	}
	if r.auth != nil {
		out.Header["Authorization"] = r.auth
	}
	return out, r.rt, true
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
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
}
