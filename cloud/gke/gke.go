package gke

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/login/loginhttp"
	"github.com/authvault/authvault/redact"
)

// DefaultScope is the OAuth2 scope that lets a token call GKE's API
// servers. Login asks it with userinfo.email unless Options.Scopes says.
const DefaultScope = "https://www.googleapis.com/auth/cloud-platform"

// emailScope has Google put a service account's email in what it says of
// the token's identity, so that GKE names a service account by its email
// (as RBAC bindings name it), not by its numeric ID.
const emailScope = "https://www.googleapis.com/auth/userinfo.email"

// Options says which cluster to log in to, and as whom.
type Options struct {
	// Server is the cluster's endpoint, https://<IP or DNS name>. Required.
	Server string
	// CAData is the cluster's CA certificate (PEM or base64 PEM, as GKE's
	// masterAuth.clusterCaCertificate gives it). Required: a Google token is
	// never sent to a server this process cannot verify.
	CAData []byte
	// Scopes of the access token. Default: DefaultScope and
	// https://www.googleapis.com/auth/userinfo.email, as
	// gke-gcloud-auth-plugin asks: without the latter, GKE names a
	// service account by its numeric ID, and RBAC bound to its email does
	// not match.
	Scopes []string

	// Credentials is the Google identity to log in as. When it carries its
	// JSON, each fetch builds a new token source from it (see the package
	// doc); when not, its TokenSource is asked as it is: that source
	// decides when a token is new, and its requests are not canceled with
	// the login.
	Credentials *google.Credentials
	// CredentialsJSON is a credentials file's content: a service_account
	// key, an external_account or impersonated_service_account
	// configuration, or authorized_user. It is trusted as the process's own
	// configuration: never pass a file from an untrusted source, whose URLs
	// would receive the identity's tokens. Not with Credentials.
	//
	// Neither: Application Default Credentials.
	CredentialsJSON []byte
}

// Login returns a handler, for Vault.OnLogin, that logs in to opts.Server
// with a Google access token. The credential expires with the token, so the
// vault fetches a new one before then. It is named "gke <host>", the host
// of opts.Server; its metric label is "gke".
func Login(opts Options) login.Handler {
	return login.Named("gke "+serverHost(opts.Server), "gke", newSource(opts, time.Now).login)
}

// newSource applies opts' defaults.
func newSource(opts Options, now func() time.Time) *source {
	if len(opts.Scopes) == 0 {
		opts.Scopes = []string{DefaultScope, emailScope}
	}
	return &source{opts: opts, now: now}
}

// login is the handler.
func (s *source) login(ctx context.Context) (*login.ConnectionInfo, error) {
	switch {
	case s.opts.Server == "" || len(s.opts.CAData) == 0:
		return nil, login.Permanent(errors.New("gke: Options.Server and Options.CAData are required"))
	case s.opts.Credentials != nil && len(s.opts.CredentialsJSON) > 0:
		return nil, login.Permanent(errors.New("gke: Options.Credentials and Options.CredentialsJSON are exclusive"))
	}
	reason, _ := login.ReasonFrom(ctx)
	tok, from, err := s.token(ctx, reason.Kind)
	if err != nil {
		return nil, err
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("gke: access token", "server", redact.URL(s.opts.Server),
		"credentials", from, "expiration", tok.Expiry.UTC().Format(time.RFC3339))
	return &login.ConnectionInfo{
		Server:     s.opts.Server,
		CAData:     s.opts.CAData,
		Token:      tok.AccessToken,
		Expiration: tok.Expiry,
	}, nil
}

// failed is a failed fetch as the vault gets it: the cloud, the server, the
// credential source and what failed, never a secret.
func (s *source) failed(ctx context.Context, rec *loginhttp.Recorder, from string, err error) error {
	text, cause, permanent := loginhttp.Failure(ctx, rec, err)
	var re *oauth2.RetrieveError
	if _, sent := rec.Last(); !sent && cause == nil && errors.As(err, &re) && re.Response != nil {
		// An answer the recorder did not see (a caller's token source):
		// RetrieveError's text quotes the endpoint's description.
		text = fmt.Sprintf("the token endpoint answered HTTP %d", re.Response.StatusCode)
		permanent = loginhttp.PermanentStatus(re.Response.StatusCode)
	}
	e := &Error{Server: redact.URL(s.opts.Server), Credentials: from, What: text, cause: cause}
	if permanent {
		return login.Permanent(e)
	}
	return e
}

// Error is a failed GKE login, or a failed exchange of Federated. Its text
// holds no secret, and no part of the Google library's error, which may
// quote the token endpoint's answer; Federated's quotes what Google said
// of the refusal (its error_description or message), with the tokens the
// request carried, and anything shaped like a token, masked.
type Error struct {
	Server      string // the cluster's endpoint, user info hidden
	Credentials string // where the identity came from
	What        string // what failed
	cause       error  // the context's error, when it ended the login; federation.ErrRejected, when the STS refused the hub's token
}

func (e *Error) Error() string {
	return fmt.Sprintf("gke: no access token for %s from %s: %s", e.Server, e.Credentials, e.What)
}

// Unwrap returns the context's error when the login's context ended it,
// and federation.ErrRejected when Google's STS refused the hub's token.
func (e *Error) Unwrap() error { return e.cause }

// serverHost is the host (and port) of server, for the handler's name: no
// user info, no path.
func serverHost(server string) string {
	if u, err := url.Parse(server); err == nil && u.Host != "" {
		return u.Host
	}
	return redact.URL(server)
}
