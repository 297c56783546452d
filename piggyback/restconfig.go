package piggyback

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/internal/kubeconf"
	"github.com/authvault/authvault/internal/kubeplugins"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// FromRESTConfig returns a handler that turns a client-go config the
// operator already has into a credential on every login. Token (a JWT
// expires at its exp claim), basic auth, client certificate and CA map to
// fields; a token file is reread like
// handlers.TokenFile's; an exec provider runs through handlers.Exec, so its
// expiry drives the vault's refresh. Whatever only client-go can do (an auth
// provider, WrapTransport, a custom Transport, Dial, a Proxy function,
// impersonation) keeps client-go's own round tripper as the credential's
// Transport. The handler is named "rest.Config <host>"; its metric label is
// "rest.Config".
func FromRESTConfig(cfg *rest.Config) login.Handler {
	return login.Named("rest.Config "+redact.URL(cfg.Host), "rest.Config", func(ctx context.Context) (*login.ConnectionInfo, error) {
		info, err := kubeconf.FromREST(ctx, cfg, "", "", kubeplugins.Plugins)
		if err != nil {
			return nil, redact.Error(fmt.Errorf("piggyback: rest.Config: %w", err))
		}
		return info, nil
	})
}
