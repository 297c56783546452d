// Package vault keeps the credentials that login handlers return and hands
// them out to every request: a client-go or controller-runtime program gets a
// *rest.Config whose requests carry a valid credential through expiry,
// rotation and revocation.
//
//	v := vault.New(vault.Options{Logger: log, Registerer: metrics.Registry})
//	defer v.Shutdown(context.Background())              // after the manager has stopped
//	v.OnLogin(fromStore, login.Timeout(30*time.Second)) // none: the kubeconfig or the ServiceAccount
//	cfg, err := v.RESTConfig(ctx)                       // blocks until the first login
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{})    // every client, cache and lease goes through v
//
// A [Vault] runs the handlers registered with [Vault.OnLogin] when it first
// needs a credential, keeps one credential per handler, and gives every
// [Vault.Select] a random one of the highest priority present. When the API
// server rejects a credential, [Vault.Invalidate] drops exactly that one.
//
// The guides in the repository go with this reference: docs/vault.md for an
// operator's main on a vault and the defaults, docs/operations.md for its
// logs, metrics and readiness check, docs/guarantees.md for what it
// promises and the tests that check it.
//
// # Logging in
//
// When no usable credential is left, the next Select starts a login: every
// handler runs once, concurrently, however many callers are waiting. The
// callers go on once every handler has finished its first attempt, with the
// highest priority present, or, if a handler takes longer, once
// [Options.FirstLoginWait] has passed and a credential is present: a fast,
// low-priority handler does not serve while a slower, higher one is about to
// give its credential. A handler that fails
// is retried according to its options (see the login package); while it
// retries, callers wait, each no longer than its own context and
// [Options.MaxWait] (1 min by default), which bounds callers whose context
// has no deadline, such as a reconcile's or an informer's list: a caller
// that has waited that long gets a [*LoginError] wrapping [ErrMaxWait],
// holding every handler's last outcome, and the login goes on in the
// background for the callers that come next. A login that ends without a
// credential gives the waiting callers a [*LoginError] that says what
// failed and when the vault logs in again (or, when every handler had
// nothing to offer, what is missing: "no in-cluster service account, no
// --kubeconfig"), and further logins of a failed handler are spaced by its
// exponential backoff (1 s doubling to 1 min by default): during the
// backoff, Select fails at once instead of waiting. A handler that heals is
// picked up at its next login, without a restart.
//
// Two logins of one handler are at least its initial backoff apart (the
// login floor), so that credentials that live a few milliseconds cannot make
// it log in in a loop. A handler is never called while an earlier call of it
// still runs: when an attempt gives up on a call at the handler's timeout
// (the handler ignores its context), the next attempt waits for that call at
// most one more timeout, and otherwise ends the login, so that callers get a
// LoginError rather than wait on a handler that may never return. The log
// and the authvault_abandoned_calls gauge show such a call.
//
// # Expiry and refresh
//
// A credential with an expiration is handed out until its expiration less a
// leeway for clock skew ([Options.Leeway]). Before then, the vault reruns its
// handler in the background, when about a tenth of its life is left (at least
// 30 s, at most half of it, moved earlier by a random part of up to half that
// window), and keeps serving the old credential until the new one arrives. A
// failed refresh is retried with backoff, but never later than half the
// time its credential has left (nor sooner than the login floor), so the
// retries grow denser as the expiry nears and an issuer outage that ends
// before the credential does is caught while it serves (a retry brought
// forward so leaves the backoff where it was: one that outlasts the
// credential goes on from the step the backoff had reached); the old
// credential serves until it expires. [Vault.Refresh] asks for one at once.
// In steady state, no caller ever waits for a login. A refresh
// that would come sooner than the login floor comes at the floor; a
// credential that would not even outlive the floor (it lives milliseconds)
// is refreshed after the handler's next backoff step instead, and the step
// grows until a credential with a sound lifetime comes.
//
// # Rejected credentials
//
// The vault keeps a digest of the authentication material of each
// handler's last few invalidated credentials ([Options.InvalidatedRefused])
// and refuses a handler that returns one of them again: a token the
// server rejected does not come back in a loop. A handler that gives nothing
// but such a credential (a static token), or only an expired one, ends its
// part of the login without retrying, as one that returns nothing does:
// waiting callers get a LoginError carrying the 401 (or saying it expired) once the
// handler has been asked, and the handler runs again after its backoff.
//
// A credential that the server rejects before it served any request is a
// strike against its handler, counted once however many requests met its
// 401; the second strike in a row makes the handler back off (a broken
// handler, an authenticator outage). A credential that serves clears the
// strikes and the backoff. A handler whose credential ranked above every
// credential left logs in again at once after a rejection (after its login
// floor), or once its backoff has passed after a TLS failure or a failed
// login, so that the lower priority serves only until it is back.
//
// # CA rotation
//
// A request that fails TLS verification against its credential's server
// (its certificate is not signed by the credential's CA, or the server
// refuses the client certificate) invalidates the credential with a
// [*TLSError] and makes its handler run again after its backoff, told why
// (login.TLSFailure). Verification is never relaxed: a handler that gives
// the new CA heals the vault; one that gives the old CA again is asked once
// per backoff.
//
// # Where credentials go
//
// A request gets a credential only when its URL is below a server the vault
// knows; a path that climbs out of that server's path prefix once dot
// segments are resolved, however they are encoded, gets none. A request that
// brings its own Authorization header goes to the host it names, with no
// credential: through the TLS settings of a credential for that host, or,
// when the only one has its own Transport (which may authenticate by
// itself), through a plain transport that trusts the system's roots.
//
// # Connections
//
// Each credential has connections of its own. kube-apiserver closes an
// HTTP/2 connection after every request it rejects with 401, so on a
// connection shared by several tokens one revoked token would end the
// requests of the others in flight, which net/http retries after a backoff
// of a second and more. A rotation therefore costs one TLS handshake, and
// the old token's connections close once idle; never under a request or a
// watch. Requests that bring their own Authorization have connections of
// their own too. After Close, every connection closes as soon as the last
// response on it finishes.
//
// # Fallback
//
// A vault with no handler of its own logs in with [Options.Fallback]
// (piggyback.Defaults: the kubeconfig of --kubeconfig or $KUBECONFIG, the
// in-cluster ServiceAccount, ~/.kube/config). [Options.KeepFallback] keeps
// them beside registered handlers: a registered handler's credential then
// ranks above every fallback's, whatever their Priority, and one that gave
// nothing is asked again after its backoff while a fallback serves.
//
// The fallbacks log at V(1), with or without handlers of one's own, unless
// one of them serves (in place of the registered handlers, or for want of
// any): one INFO line then says which, with its server, and its refreshes
// and its login after a revocation are at INFO, as any handler's. So a
// start on the kubeconfig is one INFO line, however many fallbacks it
// tried. A fallback's failure is at INFO while no registered handler has
// a credential.
//
// # Stopping
//
// [Vault.Close] stops at once: requests that ask for a credential after it
// get [ErrClosed]. [Vault.Shutdown] is for a program's end: called after a
// controller-runtime manager's Start has returned, it serves the manager's
// last requests and closes once they have stopped.
//
// # Readiness
//
// [Vault.Ready] is a readiness check with the signature of
// controller-runtime's healthz.Checker: a pod whose operator cannot
// authenticate (its login round failed, or a login has hung past
// [Options.ReadyGrace]) is taken out of service, with the LoginError as the
// reason, instead of restarted.
//
// # Concurrency
//
// Select reads an immutable snapshot without a lock and allocates nothing;
// a change publishes a new snapshot. Every goroutine the vault starts ends by
// [Vault.Close], which also wakes waiting callers with [ErrClosed].
//
// # Logs
//
// The vault logs through [Options.Logger] as given, under no name of its
// own. At INFO, once each: a login and why (login.Reason), its end (the
// credential's fingerprint, server and expiration, "never" for none) and
// whose credentials are handed out when that changes (for a fallback, that
// line alone: see Fallback); a refresh's start
// is at V(1), its end at INFO, unless it gave the credential the vault
// holds (the same fingerprint, ConnectionInfo.RefreshAfter's re-reads):
// then at V(1). A handler that gave nothing and is asked
// again (every BackoffMax beside the fallback, say) says so at INFO once:
// its next logins are at V(1) until one gives a credential. A credential
// the server rejected (401) is at INFO, once: a revocation is an event,
// and the login after it says how the vault got past it. The other lines
// per request (a credential found expired, a caller given a LoginError,
// with every handler's outcome) at V(1).
//
// A failure is one line: a failed attempt, a failed login, a handler whose
// new credentials the server rejects at once. The handler's ID and the
// error (under "error") say what failed and where (the file, the Secret,
// the plugin), "action" what to do, and "retryAt" when the vault tries
// again by itself. A failure whose cause is outside the process (a refused
// token, a missing file, a failing plugin, a network error, a handler that
// does not return) is logged at INFO: logr's Error would make zap, as
// controller-runtime sets it up, add a stack trace of the vault's
// goroutine, which says nothing about any of those. A handler's bug (a
// panic, an invalid ConnectionInfo) is at error level. A handler gets the
// logger in its context (logr.FromContext) with the values "handler",
// "reason" and "attempt", so its own lines say which login they belong to.
//
// # Secrets
//
// Log lines (through [Options.Logger], a logr.Logger) and errors name
// handlers, servers and credential fingerprints, never a token, password or
// private key; a [*Credential] prints redacted with every fmt verb.
package vault
