package addonauth

import (
	"context"
	"slices"
	"time"
)

// User is the caller of a request, as the API server knows it.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Extra holds the caller's extra attributes, as the API server's
	// authenticator gave them (a token's review, or a front proxy).
	Extra map[string][]string
	// Expires is when the caller's token expires: for a foreign JWT its
	// exp claim, unverified (it only shortens access); zero when unknown
	// (a reviewed token that is not a JWT, or has no exp).
	Expires time.Time
}

type userKey struct{}

// UserFrom returns the caller of the request whose context ctx is, for an
// upstream in the same process as the middleware.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

func withUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// clone is a copy of u that shares nothing with it.
func (u User) clone() User {
	u.Groups = slices.Clone(u.Groups)
	if u.Extra != nil {
		extra := make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = slices.Clone(v)
		}
		u.Extra = extra
	}
	return u
}
