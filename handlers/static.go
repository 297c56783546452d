package handlers

import (
	"context"

	"github.com/authvault/authvault/login"
)

// Static returns a handler that gives a copy of info on every login: a token
// from a flag, a fixed test credential. Once the server rejects it, the vault
// refuses the same credential again, so a rejected static credential ends in
// a LoginError rather than a loop.
func Static(info login.ConnectionInfo) login.Handler {
	return func(context.Context) (*login.ConnectionInfo, error) {
		c := info
		return &c, nil
	}
}
