package vault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// UnauthorizedError is why the transport invalidated a credential: the
// server answered 401.
type UnauthorizedError struct {
	Server     string
	Status     string // "401 Unauthorized"
	StatusCode int    // 401
	// Challenge is the response's WWW-Authenticate header, if any; empty
	// when it is longer than 4 KiB or repeats the rejected credential's
	// token or password.
	Challenge string
}

func (e *UnauthorizedError) Error() string {
	return fmt.Sprintf("vault: %s answered %s", e.Server, e.Status)
}

// Invalidate removes cred from the vault because the server rejected it;
// cause says why (the 401). It removes exactly that object: a credential
// that its handler has replaced since, or one already invalidated, is left
// alone, so a late 401 cannot remove a fresh credential. The handler's later
// logins may not return the same authentication material again.
//
// Invalidate never blocks. It logs through ctx's logger when ctx has one,
// so the line carries the caller's context. It returns ErrClosed once the
// vault is closed.
func (v *Vault) Invalidate(ctx context.Context, cred *Credential, cause error) error {
	if cred == nil {
		return errors.New("vault: Invalidate of a nil credential")
	}
	if v.invalidate(ctx, cred, cause, byCaller) {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.core.closed {
		return ErrClosed
	}
	return nil
}

// invalidate removes cred and tells whether it did: of many callers that
// invalidate the same credential, exactly one does. A 401 counts against
// its handler when it never served (see handlerState.rejected).
func (v *Vault) invalidate(ctx context.Context, cred *Credential, cause error, by invalidation) bool {
	// Outside the lock, what reads the cause, and the logger: the caller's
	// when its context has one (named, so the line says where it comes
	// from). A credential the server rejected (revoked, most often) is an
	// event its owner wants to see: at INFO, once, since a credential is
	// invalidated once. The others (by the caller, a TLS failure, which the
	// handler's backoff logs) at V(1).
	loss, why := rejection(cause, cred), causeText(cause)
	log := v.log
	if l, err := logr.FromContext(ctx); err == nil {
		log = l.WithName("authvault")
	}
	if by != by401 {
		log = log.V(1)
	}
	v.mu.Lock()
	e, ok, struck := v.core.invalidated(v.clock.Now(), cred, cause, by, loss)
	if !ok {
		v.mu.Unlock()
		return false
	}
	v.metrics.invalidations.WithLabelValues(cred.owner.settings.Label).Inc()
	// Before applyLocked, which logs what serves from now on (a fallback,
	// another handler): the loss comes first in the log, as it did.
	log.Info("credential invalidated", "handler", cred.Handler, "fingerprint", cred.fingerprint,
		"server", cred.Info.Server, "cause", why, "left", len(e.creds))
	v.applyLocked(e)
	h := cred.owner
	retryAt, strikes := h.retryAt, h.strikes
	v.mu.Unlock()

	if struck {
		// What the handler does from now on, not what one request met:
		// the vault's own logger. The error is the 401, which says why.
		logFailure(v.log, cause, "login failed: the server rejected the handler's new credential at once",
			"handler", cred.Handler, "fingerprint", cred.fingerprint, "strikes", strikes, "retryAt", retryAt.Round(0))
	}
	return true
}

// unauthorized is why cred is invalidated when the server answered resp, a
// 401.
func unauthorized(cred *Credential, resp *http.Response) *UnauthorizedError {
	return &UnauthorizedError{
		Server: cred.Info.Server, Status: resp.Status, StatusCode: resp.StatusCode,
		Challenge: safeChallenge(resp.Header.Get("WWW-Authenticate"), cred),
	}
}

// invalidation says who invalidates a credential, and so what it costs its
// handler.
type invalidation int

const (
	byCaller     invalidation = iota // Vault.Invalidate: the digest is refused for a while
	by401                            // the transport met a 401: refused, and a strike if it never served
	byTLSFailure                     // the transport failed TLS verification: the handler backs off
)

// maxChallenge bounds the WWW-Authenticate header a Reason carries: a
// server or a proxy may send megabytes, which an exec plugin's environment
// (128 KiB a string on Linux) or a log line must not carry. A longer one is
// dropped rather than cut, which could change its meaning.
const maxChallenge = 4 << 10

// causeText is err's text for a log line, "" for nil. A caller's cause
// may quote a URL with user info.
func causeText(err error) string {
	if err == nil {
		return ""
	}
	return redact.URL(err.Error())
}

// rejection is the Reason of a login after cred was invalidated for cause:
// with the response's status and challenge when cause is the transport's.
func rejection(cause error, cred *Credential) login.Reason {
	r := login.Reason{Kind: login.Rejected}
	var ue *UnauthorizedError
	if errors.As(cause, &ue) {
		r.StatusCode, r.Challenge = ue.StatusCode, safeChallenge(ue.Challenge, cred)
	}
	return r
}

// safeChallenge is a 401's WWW-Authenticate header as the vault may log it
// and hand it on: "" when it is longer than maxChallenge, or when it
// repeats cred's secret (a gateway's error_description="token … is
// revoked"), which would otherwise reach the log line of the next login.
// It is left out rather than cut or masked, which could change its meaning.
func safeChallenge(challenge string, cred *Credential) string {
	if len(challenge) > maxChallenge {
		return ""
	}
	for _, secret := range secretsOf(cred) {
		if secret != "" && strings.Contains(challenge, secret) {
			return ""
		}
	}
	return challenge
}

// secretsOf is what of cred's authentication a server may quote back: its
// token, its password, and the value of its Authorization header (basic
// auth's base64).
func secretsOf(cred *Credential) []string {
	secrets := []string{cred.Info.Token, cred.Info.Password}
	if r := cred.route; r != nil && len(r.auth) > 0 {
		if _, value, ok := strings.Cut(r.auth[0], " "); ok {
			secrets = append(secrets, value)
		}
	}
	return secrets
}
