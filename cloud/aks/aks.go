package aks

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/go-logr/logr"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// DefaultServerID is the application ID of the AKS server application,
// the same for every AKS cluster with Entra ID integration.
const DefaultServerID = "6dae42f8-4368-4678-94ff-3960e28e3630"

// Options says which cluster to log in to, and as whom.
type Options struct {
	// Server is the cluster's endpoint (its FQDN, as the kubeconfig has it).
	// Required.
	Server string
	// CAData is the cluster's CA certificate, PEM or base64 PEM. Required:
	// an Entra ID token is never sent to a server this process cannot
	// verify.
	CAData []byte
	// ServerID is the server application's ID, as kubelogin's --server-id.
	// Default: DefaultServerID.
	ServerID string
	// Credential is the identity to log in as. Default: a new
	// DefaultAzureCredential for each token (see the package doc).
	Credential azcore.TokenCredential
}

// Login returns a handler, for Vault.OnLogin, that logs in to opts.Server
// with an Entra ID token for opts.ServerID. The credential expires with the
// token, so the vault fetches a new one before then. It is named "aks
// <host>", the host of opts.Server; its metric label is "aks".
func Login(opts Options) login.Handler {
	return login.Named("aks "+serverHost(opts.Server), "aks", newSource(opts, time.Now).login)
}

// newSource applies opts' defaults.
func newSource(opts Options, now func() time.Time) *source {
	if opts.ServerID == "" {
		opts.ServerID = DefaultServerID
	}
	return &source{opts: opts, now: now, scope: opts.ServerID + "/.default", newDefault: newDefaultCredential}
}

// login is the handler.
func (s *source) login(ctx context.Context) (*login.ConnectionInfo, error) {
	if s.opts.Server == "" || len(s.opts.CAData) == 0 {
		return nil, login.Permanent(errors.New("aks: Options.Server and Options.CAData are required"))
	}
	reason, _ := login.ReasonFrom(ctx)
	tok, from, err := s.token(ctx, reason.Kind)
	if err != nil {
		return nil, err
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("aks: access token", "server", redact.URL(s.opts.Server),
		"credential", from, "expiration", tok.ExpiresOn.UTC().Format(time.RFC3339))
	return &login.ConnectionInfo{
		Server:     s.opts.Server,
		CAData:     s.opts.CAData,
		Token:      tok.Token,
		Expiration: tok.ExpiresOn,
	}, nil
}

// Error is a failed AKS login. Its text holds no secret, and no response
// body of Entra ID.
type Error struct {
	Server     string // the cluster's endpoint, user info hidden
	Credential string // where the identity came from
	What       string // what failed
	cause      error  // the context's error, when it ended the login; federation.ErrRejected for a refused hub token
}

func (e *Error) Error() string {
	return fmt.Sprintf("aks: no Entra ID token for %s from %s: %s", e.Server, e.Credential, e.What)
}

// Unwrap returns the context's error when the login's context ended it,
// and federation.ErrRejected when Entra ID refused the hub's token
// (Federated).
func (e *Error) Unwrap() error { return e.cause }

// serverHost is the host (and port) of server, for the handler's name: no
// user info, no path.
func serverHost(server string) string {
	if u, err := url.Parse(server); err == nil && u.Host != "" {
		return u.Host
	}
	return redact.URL(server)
}
