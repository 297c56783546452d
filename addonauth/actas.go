package addonauth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

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
// ServiceAccount or a node by its name alone (constrained impersonation
// allows nothing more for them, and the API server adds their groups), a
// person with UID, groups and extras (extras can restrict what a person
// may do, so none is dropped), system:authenticated left for the API
// server to add. The docs/addonauth.md guide gives the RBAC this needs.
//
// A client-go clientset or a controller-runtime client made from it
// passes each call's context on: call it with the request's. A cache
// (an informer, a manager's client) lists with contexts of its own and
// would fail; one per person would hold every object each may see, and a
// revoked person's view until it noticed. List or get as the caller
// instead, and give a controller-runtime client a RESTMapper made from the
// service's own config.
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
	if !ok {
		closeBody(req)
		return nil, ErrNoCaller
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
	if _, _, err := serviceaccount.SplitUsername(u.Name); err == nil || strings.HasPrefix(u.Name, "system:node:") {
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

// closeBody closes the body of a request that is not sent, as a
// RoundTripper must.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
