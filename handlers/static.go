package handlers

import (
	"context"

	"github.com/authvault/authvault/handlers/internal/kubeconf"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// Static returns a handler that gives a copy of info on every login: a token
// from a flag, a fixed test credential. Once the server rejects it, the vault
// refuses the same credential again, so a rejected static credential ends in
// a LoginError rather than a loop. A token that is a JWT expires at its exp
// claim, unless info.Expiration is sooner: the vault then stops handing it
// out, and says so, rather than sending a token the server will refuse.
//
// The handler is named "static credential for <server>"; its metric label
// is "static".
func Static(info login.ConnectionInfo) login.Handler {
	if exp, ok := kubeconf.TokenExpiry(info.Token); ok && (info.Expiration.IsZero() || exp.Before(info.Expiration)) {
		info.Expiration = exp
	}
	return login.Named("static credential for "+redact.URL(info.Server), "static", func(context.Context) (*login.ConnectionInfo, error) {
		c := info
		return &c, nil
	})
}
