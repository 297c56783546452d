package vault

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/authvault/authvault/internal/pemdata"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// route is what the transport needs to send a request with a credential,
// prepared once when the credential arrives so that a request does no
// parsing, encoding or map lookup.
type route struct {
	// base is the credential's server URL, split.
	base
	// auth is the Authorization header value, nil when the credential
	// authenticates by TLS or its own transport. Shared by every request:
	// read-only, and with cap == len so that an append copies.
	auth []string
	// rt sends the request: its identity's transport, or the
	// credential's own Transport.
	rt http.RoundTripper
	// transport is the pooled transport behind rt; nil for an own
	// Transport.
	transport *pooled
	// bare sends requests that bring their own Authorization header: the
	// connections of the credential's TLS identity without its client
	// certificate or token. bare is transport when the credential has
	// neither.
	bare *pooled
}

// identity is what makes two credentials need different connections, and
// the key of their transport in the pool: the server's origin, everything
// about TLS and the proxy, and the Authorization header. The header is part
// of it because the API server closes an HTTP/2 connection after a request
// it rejects with 401 (its mitigation for unauthenticated clients, on since
// Kubernetes 1.29): on a connection shared by several tokens, one revoked
// token's 401 would end the requests of every other token in flight on it,
// and net/http retries those after a backoff of 1 s and more
// (docs/benchmarks.md, "The long request"). A rotation costs one TLS
// handshake.
//
// The PEM and the header are strings so that an identity is comparable;
// it is never printed.
type identity struct {
	scheme, host, serverName, proxy string
	insecure                        bool
	ca, cert, key                   string // PEM
	auth                            string // the Authorization header, "" when none
}

// bare is the identity for requests that authenticate by themselves:
// without the client certificate and the Authorization header. Such
// requests share their connections with no credential, so that a 401 of
// theirs never closes a credential's connection.
func (id identity) bare() identity {
	id.cert, id.key, id.auth = "", "", ""
	return id
}

// newIdentity reads what info says about TLS, with auth as its
// Authorization header. It reads the CA, certificate and key files now, so
// that a rotated file makes a new identity and an unreadable one fails the
// login with an error that names it.
func newIdentity(info *login.ConnectionInfo, auth string) (identity, error) {
	u, err := url.Parse(info.Server)
	if err != nil {
		return identity{}, fmt.Errorf("vault: Server is not a URL: %w", redact.Error(err))
	}
	id := identity{
		scheme: u.Scheme, host: u.Host, serverName: info.TLSServerName, proxy: info.ProxyURL,
		insecure: info.Insecure, auth: auth,
	}
	for _, f := range []struct {
		name, path string
		data       []byte
		dst        *string
	}{
		{"CAPath", info.CAPath, info.CAData, &id.ca},
		{"CertificatePath", info.CertificatePath, info.CertificateData, &id.cert},
		{"PrivateKeyPath", info.PrivateKeyPath, info.PrivateKeyData, &id.key},
	} {
		data := f.data
		if f.path != "" {
			if data, err = os.ReadFile(f.path); err != nil {
				// The path is not a secret; the error from os names it.
				return identity{}, fmt.Errorf("vault: reading %s: %w", f.name, err)
			}
		}
		pemData, err := pemdata.Decode(data)
		if err != nil {
			return identity{}, fmt.Errorf("vault: %s %q is %w", f.name, f.path, err)
		}
		*f.dst = string(pemData)
	}
	return id, nil
}

// newRoute prepares info for requests, taking its transports from p.
func newRoute(info *login.ConnectionInfo, p *pool) (*route, error) {
	u, err := url.Parse(info.Server)
	if err != nil {
		return nil, fmt.Errorf("vault: Server is not a URL: %w", redact.Error(err))
	}
	r := &route{base: base{scheme: u.Scheme, host: u.Host, prefix: strings.TrimSuffix(u.EscapedPath(), "/")}}
	if h := authorization(info); h != "" {
		r.auth = []string{h}
	}
	if info.Transport != nil {
		r.rt = info.Transport
		return r, nil
	}
	id, err := newIdentity(info, authorization(info))
	if err != nil {
		return nil, err
	}
	if r.transport, err = p.acquire(id); err != nil {
		return nil, err
	}
	r.rt, r.bare = r.transport, r.transport
	if bare := id.bare(); bare != id {
		if r.bare, err = p.acquire(bare); err != nil {
			p.release(r.transport)
			return nil, err
		}
	}
	return r, nil
}

// authorization is the Authorization header value of info: its token with
// its scheme, or basic auth.
func authorization(info *login.ConnectionInfo) string {
	if info.Username != "" {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(info.Username+":"+info.Password))
	}
	switch {
	case info.Token == "" && info.Scheme == "":
		return ""
	case info.Token == "":
		return info.Scheme
	case info.Scheme == "":
		return "Bearer " + info.Token
	default:
		return info.Scheme + " " + info.Token
	}
}

// base is a URL prefix under which the transport routes requests: the server
// of RESTConfig, and of every credential the vault has held.
// prefix has no trailing slash ("" or "/k8s/clusters/c-1").
type base struct{ scheme, host, prefix string }

// relative returns the part of u below b, and whether u is below b at all.
// A URL with an opaque part is below no server: a request goes where
// Opaque says, whatever Host and Path say ("//other-host/x" makes an
// absolute request line, and the URL's String names other-host, which a
// WebSocket dialer connects to).
func (b base) relative(u *url.URL) (string, bool) {
	if u.Scheme != b.scheme || u.Host != b.host || u.Opaque != "" {
		return "", false
	}
	path := u.EscapedPath()
	if b.prefix == "" {
		return path, true
	}
	rest, ok := strings.CutPrefix(path, b.prefix)
	if !ok || (rest != "" && rest[0] != '/') || leavesRoot(rest) {
		return "", false
	}
	return rest, true
}

// leavesRoot tells whether the escaped path p climbs above its own root
// once dot segments are resolved, as the server or a proxy in front of it
// may resolve them: "/../c-2" below "/k8s/clusters/c-1" is c-2's path, and
// must not carry c-1's credential. Dots may come percent-encoded, even
// twice, a slash as "%2F" or a backslash, and ".." with a ";param" tail;
// a path that does not decode is taken to leave too. A path that leaves
// and comes back is counted as leaving: clients do not send such paths.
func leavesRoot(p string) bool {
	if !strings.Contains(p, "/.") && !strings.ContainsAny(p, `%\`) {
		return false // the common case: nothing to resolve
	}
	for range 3 {
		decoded, err := url.PathUnescape(p)
		if err != nil {
			return true
		}
		if decoded == p {
			break
		}
		p = decoded
	}
	depth := 0
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		seg, _, _ = strings.Cut(seg, ";")
		switch seg {
		case ".":
		case "..":
			if depth--; depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// target is the URL of a request for u, relative path rel, sent with r.
func (r *route) target(u *url.URL, rel string) *url.URL {
	t := *u
	t.Scheme, t.Host = r.scheme, r.host
	if r.prefix == "" && rel == u.EscapedPath() {
		return &t
	}
	escaped := r.prefix + rel
	if p, err := url.PathUnescape(escaped); err == nil {
		t.Path = p
		t.RawPath = ""
		if t.EscapedPath() != escaped {
			t.RawPath = escaped
		}
	}
	return &t
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
	case ownAuth && b == pendingBase:
		// PendingServer names no server: the one the config would have
		// named, had the first login given a credential, is the serving
		// one's. The caller's Authorization goes there alone.
		out.URL = r.target(req.URL, rel)
		out.Host = ""
		if _, below := r.base.relative(out.URL); !below {
			return out, v.pool.plain(), false
		}
		return out, v.ownAuthTransport(r.base, r), false
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
