package vault

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// The vault's log follows one rule: what a person running the operator
// needs to know is logged at INFO, once (a login and why, its end, which
// handler's credentials are handed out and until when, a failure); what
// happens per request (an invalidation, an expiry found by Select, a
// caller refused) is at V(1). A failure is one line that says what failed
// (the handler, which names its file, Secret or plugin), why (the error,
// under "error") and what to do ("action"). The helpers below keep the
// lines alike.

// expirationValue is an expiration as a log value: "never" for the zero
// time, which a line would otherwise print as year 1.
func expirationValue(t time.Time) any {
	if t.IsZero() {
		return "never"
	}
	return t.Round(0) // without the monotonic reading: a wall-clock time
}

// withTime appends key and t to kv unless t is zero: no log line shows the
// zero time.
func withTime(kv []any, key string, t time.Time) []any {
	if t.IsZero() {
		return kv
	}
	return append(kv, key, t.Round(0))
}

// logFailure logs a failed login, err saying why, as one line with err
// under "error" and what to do under "action". A failure whose cause is
// outside the process (a refused token, a missing file, a failing plugin,
// a network error, a handler that does not return) is expected: it is
// logged at INFO, since logr's Error makes zap (controller-runtime's
// logger) add a stack trace, and the stack of the vault's login goroutine
// says nothing about a file or a plugin. A bug in the process (a handler
// that panicked or returned an invalid ConnectionInfo) is at error level.
func logFailure(log logr.Logger, err error, msg string, kv ...any) {
	err = redact.Error(err)
	kv = append(kv, "action", action(err))
	if inProcess(err) {
		log.Error(err, msg, kv...)
		return
	}
	log.Info(msg, append([]any{"error", err}, kv...)...)
}

// inProcess tells whether a login failed for a bug in the process rather
// than for what the handler reads or asks.
func inProcess(err error) bool {
	var panicked *login.PanicError
	var invalid *invalidInfoError
	return errors.As(err, &panicked) || errors.As(err, &invalid)
}

// action is what a person reading a failed login's line can do about it.
// The handler's ID and its error say where (the file, the Secret, the
// plugin); the vault logs in again by itself, so fixing that is enough.
func action(err error) string {
	var abandoned *abandonedError
	var unauthorized *UnauthorizedError
	switch {
	case inProcess(err):
		return "fix the handler: this is a bug in it, the vault logs in again by itself"
	case errors.Is(err, errStillRunning):
		return "make the handler return when its context ends; the vault calls it again once it has"
	case errors.As(err, &abandoned):
		return "look at what the handler waits for (a plugin, a network), or give it a longer login.Timeout"
	case errors.As(err, &unauthorized) && audienceRefused(unauthorized.Challenge) != "":
		// kube-apiserver answers a 401 with no Bearer realm; a service
		// behind addonauth or addon-proxy names its audience as one, and
		// says when the token was for another. Before errInvalidated: a
		// handler that gives the refused token again is told the same.
		realm := audienceRefused(unauthorized.Challenge)
		return fmt.Sprintf("the server is a service that takes tokens for the audience %q (its realm), not an API server: log in with a token for that audience "+
			"(handlers.TokenRequest with Audiences: []string{%q}, Cluster.Server the service's URL); the vault logs in again by itself", realm, realm)
	case errors.Is(err, errInvalidated):
		return "replace the credential where the handler reads it: the server rejected this one"
	case errors.Is(err, errExpired):
		return "renew the credential where the handler reads it: it has expired"
	case errors.As(err, &unauthorized):
		return "check the identity the handler logs in as, and the cluster's authenticator; the vault logs in again by itself"
	default:
		return "fix what the error names; the vault logs in again by itself, no restart needed"
	}
}

// refused logs, at V(1), the outcome of every handler when a caller gets
// err: the LoginError's message names only what failed.
func (v *Vault) refused(err *LoginError) {
	if err == nil || !v.log.V(1).Enabled() {
		return
	}
	outcomes := make([]string, 0, len(err.Handlers))
	for _, o := range err.Handlers {
		outcomes = append(outcomes, o.String()) // redacted
	}
	v.log.V(1).Info("no usable credential", "handlers", outcomes)
}

// offstage tells that h's routine lines (a login starting, its end) are at
// V(1): h is a fallback that holds no credential that serves, or one
// beside registered handlers (Options.KeepFallback) that have one. So the
// fallbacks say nothing at INFO while a registered handler serves, nor in
// a login round whose end decides what serves: logServingLocked says at
// INFO which fallback serves, if one does, and a start on the kubeconfig
// is that one line, not a "logging in" for each fallback tried and a
// "logged in" besides. A fallback whose credential serves logs its
// refreshes, and its login after a revocation, at INFO, as any handler
// does. Read before the event the line is about: a fallback's first
// credential does not serve yet.
func (c *core) offstage(h *handlerState) bool {
	return h.fallback && (h.cred == nil && !servedLast(h) || c.outranked(h))
}

// servedLast tells that h logs in because its last credential was in use
// and failed there (the server rejected it, it expired, TLS failed): a
// fallback that served in the registered handlers' place, whose login
// after a revocation is as much an event as theirs.
func servedLast(h *handlerState) bool {
	switch h.reason.Kind {
	case login.Rejected, login.Expired, login.TLSFailure:
		return true
	}
	return false
}

// outranked tells that h is a fallback beside a registered handler that
// has a credential: then h's failures too are at V(1). Without one, a
// fallback's failure may be why the vault has nothing: at INFO.
func (c *core) outranked(h *handlerState) bool {
	return h.fallback && slices.ContainsFunc(c.handlers, func(r *handlerState) bool { return r.cred != nil })
}

// emptyHanded tells that no handler holds or is getting a credential and
// every one gave nothing (none failed): the vault has nothing to log in
// with, and no failure's line has said so.
func (c *core) emptyHanded() bool {
	active := c.active()
	if len(active) == 0 || c.loggingIn() || len(c.creds()) > 0 {
		return false // a fallback registered handlers replaced may still serve
	}
	for _, h := range active {
		if h.cred != nil || !errors.Is(h.outcome, errNoCredential) {
			return false
		}
	}
	return true
}

// logEmptyHandedLocked says once at INFO, when the last login of a round
// ends with nothing from any handler, what the vault lacks: a fallback's
// "gave nothing" is at V(1) (a kubeconfig beside no in-cluster service
// account is not news), so without this line a vault with nothing at all
// to log in with would say nothing. Said again only after a credential
// has come and gone.
func (v *Vault) logEmptyHandedLocked() {
	if v.emptyHanded || !v.core.emptyHanded() {
		return
	}
	v.emptyHanded = true
	v.log.Info("no usable credential", "error", v.core.loginError(v.clock.Now(), nil).Error(),
		"action", "provide what the error names; the vault looks again by itself")
}

// audienceRefused is the realm of a Bearer challenge that refuses a token
// for its audience (addonauth's error_description names it), or "". A
// realm that could be an API server's audience (a URL, kubernetes.default)
// is left out: the advice would be to mint a token the API server takes
// and send it to the server that asked.
func audienceRefused(challenge string) string {
	realm := bearerRealm(challenge)
	if realm == "" || !strings.Contains(strings.ToLower(challenge), "audience") ||
		strings.Contains(realm, "://") || strings.Contains(realm, "kubernetes.default") || strings.HasPrefix(realm, "api") {
		return ""
	}
	return realm
}

// bearerRealm is the realm of a Bearer challenge (a WWW-Authenticate
// header), or "".
func bearerRealm(challenge string) string {
	m := bearerRealmRE.FindStringSubmatch(challenge)
	if m == nil {
		return ""
	}
	return m[1]
}

var bearerRealmRE = regexp.MustCompile(`(?i)^\s*bearer\s+(?:.*[\s,])?realm="([^"]{1,253})"`)
