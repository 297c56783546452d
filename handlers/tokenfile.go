package handlers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/authvault/authvault/internal/clockctx"
	"github.com/authvault/authvault/login"
)

// RereadAfter is the longest a token read from a file is used before the file
// is read again: projected service-account tokens rotate under a running pod.
const RereadAfter = time.Minute

// TokenFile returns a handler that reads a bearer token from path on every
// login and combines it with base, which gives the server, CA and the rest.
// Surrounding whitespace is trimmed; an empty or unreadable file is an error
// that names the path.
//
// The credential expires at the token's exp claim when it is a JWT, and in
// any case RereadAfter after it was read, so the vault rereads the file in
// the background at least that often and a rotated token is picked up
// without any caller waiting.
func TokenFile(path string, base login.ConnectionInfo) login.Handler {
	return func(ctx context.Context) (*login.ConnectionInfo, error) {
		now := clockctx.Now(ctx)
		raw, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, os.ErrPermission) {
				return nil, login.Permanent(fmt.Errorf("handlers: token file: %w", err))
			}
			return nil, fmt.Errorf("handlers: token file: %w", err)
		}
		token := strings.TrimSpace(string(raw))
		if token == "" {
			return nil, fmt.Errorf("handlers: token file %s is empty", path)
		}
		info := base
		info.Token = token
		info.Expiration = now.Add(RereadAfter)
		if exp, ok := jwtExpiry(token); ok && exp.Before(info.Expiration) {
			info.Expiration = exp
		}
		if !base.Expiration.IsZero() && base.Expiration.Before(info.Expiration) {
			info.Expiration = base.Expiration
		}
		return &info, nil
	}
}
