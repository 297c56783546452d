package addonauth

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// ErrNoCaller is what a request made through ActAsCaller's config fails
// with when its context holds no caller the middleware verified: it is
// never sent, so that it cannot act as the service itself by mistake.
var ErrNoCaller = errors.New("addonauth: no verified caller in the request's context to act as: " +
	"pass the context of the request the middleware handed on (r.Context()); " +
	"what the service does for itself (an informer, a RESTMapper's discovery) needs its own config")

// ActAsCaller returns a copy of cfg, the service's own config (a vault's,
// whose credential goes on rotating under it), whose every request acts
// as the caller of the request being served: it takes the User that the
// middleware put in the context it is made with (UserFrom, never a
// header) and sends it as Impersonate-User, Impersonate-Uid,
// Impersonate-Group and Impersonate-Extra-* (the keys escaped as the API
// server reads them), so that the API server's authorization decides
// what that person may do, and its audit names both. Nothing is kept
// between requests: a client made once serves every caller, each request
// as its own. A request without a verified caller fails with ErrNoCaller,
// and one that already names someone to impersonate is refused.
//
// What is sent is the identity the API server would rebuild itself: a
// ServiceAccount (its name and its two groups) or a node (a node's name, in
// system:nodes) with no extras but those the API server sets itself, by its
// name alone, as constrained impersonation requires (the API server then
// adds a ServiceAccount's groups, and, under constrained impersonation, a
// node's; under classic impersonation a node has system:authenticated
// alone); anyone else, whatever their name, with UID, groups and extras
// (extras can restrict what a person may do, so none is dropped);
// system:authenticated left for the API server to add. A caller with an
// extra whose key has capitals is refused: the API server lowercases the
// keys of Impersonate-Extra- headers. The docs/addonauth.md guide gives
// the RBAC this needs.
//
// A redirect to another host is not followed: the caller's identity is the
// API server's to know. The service's own credential must not impersonate
// anyone itself (a kubeconfig's "as:"): Kubernetes does not impersonate
// through an impersonation, and the request would go out with the
// credential underneath.
//
// A client-go clientset or a controller-runtime client made from it
// passes each call's context on: call it with the request's. A cache
// (an informer) made from it lists with contexts of its own and fails;
// one per person would hold every object each may see, and a revoked
// person's view until it noticed. List or get as the caller instead; give
// a controller-runtime client a RESTMapper made from the service's own
// config, and never Options.Cache, whose reads would be the service's.
func ActAsCaller(cfg *rest.Config) (*rest.Config, error) {
	if cfg == nil {
		return nil, errors.New("addonauth: ActAsCaller: the config is nil")
	}
	if i := cfg.Impersonate; i.UserName != "" || i.UID != "" || len(i.Groups) > 0 || len(i.Extra) > 0 {
		return nil, errors.New("addonauth: ActAsCaller: the config already impersonates someone (its Impersonate field): " +
			"the service's own config is what acts as each caller")
	}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return actingAs{next: rt} })
	return out, nil
}

// actingAs sends each request as the caller in its context.
type actingAs struct{ next http.RoundTripper }

func (a actingAs) RoundTrip(req *http.Request) (*http.Response, error) {
	u, ok := UserFrom(req.Context())
	if !ok || u.Name == "" {
		// An empty Impersonate-User is no impersonation to the API
		// server: the request would be the service's own.
		closeBody(req)
		return nil, ErrNoCaller
	}
	if prev := req.Response; prev != nil && prev.Request != nil && (prev.Request.URL.Host != req.URL.Host || prev.Request.URL.Scheme != req.URL.Scheme) {
		// A redirect to another host: the caller's identity (name,
		// groups, extras such as a credential's id) is the API server's
		// to know, no one else's.
		closeBody(req)
		return nil, fmt.Errorf("addonauth: a request acting as the caller was redirected from %s://%s to another server, %s://%s: not followed",
			prev.Request.URL.Scheme, prev.Request.URL.Host, req.URL.Scheme, req.URL.Host)
	}
	for key := range u.Extra {
		if key != strings.ToLower(key) {
			// The API server lowercases an Impersonate-Extra- header's
			// name before it unescapes it: it would act as someone else.
			closeBody(req)
			return nil, fmt.Errorf("addonauth: the caller's extra %q has capitals, which no Impersonate-Extra- header carries as they are: not acted as", key)
		}
	}
	for name := range req.Header {
		if strings.HasPrefix(http.CanonicalHeaderKey(name), "Impersonate-") {
			closeBody(req)
			return nil, fmt.Errorf("addonauth: a request acting as the caller already carries %s: it would act as someone else", http.CanonicalHeaderKey(name))
		}
	}
	return transport.NewImpersonatingRoundTripper(impersonation(u), a.next).RoundTrip(req)
}

// WrappedRoundTripper lets client-go reach the transport underneath.
func (a actingAs) WrappedRoundTripper() http.RoundTripper { return a.next }

// impersonation is what a request acting as u asks for.
func impersonation(u User) transport.ImpersonationConfig {
	if (isServiceAccount(u) || isNode(u)) && onlyServerExtras(u) {
		return transport.ImpersonationConfig{UserName: u.Name}
	}
	groups := make([]string, 0, len(u.Groups))
	for _, g := range u.Groups {
		if g != user.AllAuthenticated {
			groups = append(groups, g)
		}
	}
	return transport.ImpersonationConfig{UserName: u.Name, UID: u.UID, Groups: groups, Extra: u.Extra}
}

// isServiceAccount tells whether u is a ServiceAccount as its token's
// authenticator makes one: its name and its two groups. A name alone may be
// anyone's (a certificate's common name, a webhook's answer).
func isServiceAccount(u User) bool {
	ns, _, err := serviceaccount.SplitUsername(u.Name)
	return err == nil && slices.Contains(u.Groups, serviceaccount.AllServiceAccountsGroup) &&
		slices.Contains(u.Groups, serviceaccount.MakeNamespaceGroupName(ns))
}

// isNode tells whether u is a node as the API server takes one: a name
// system:node:NAME of a node's valid name, in group system:nodes.
func isNode(u User) bool {
	name, ok := strings.CutPrefix(u.Name, "system:node:")
	return ok && len(validation.IsDNS1123Subdomain(name)) == 0 && slices.Contains(u.Groups, user.NodesGroup)
}

// serverExtras are the extras the API server gives a ServiceAccount's
// token itself: what it rebuilds, or has no use for, when one is
// impersonated by name.
var serverExtras = []string{serviceaccount.PodNameKey, serviceaccount.PodUIDKey, serviceaccount.NodeNameKey, serviceaccount.NodeUIDKey, user.CredentialIDKey}

// onlyServerExtras tells whether every extra of u's is one the API server
// sets itself: another (a webhook's scopes) may restrict u, and is sent.
func onlyServerExtras(u User) bool {
	for key := range u.Extra {
		if !slices.Contains(serverExtras, key) {
			return false
		}
	}
	return true
}

// closeBody closes the body of a request that is not sent, as a
// RoundTripper must.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
