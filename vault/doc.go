// Package vault keeps the credentials that login handlers return and hands
// them out to every request.
//
// A [Vault] runs the handlers registered with [Vault.OnLogin] when it first
// needs a credential, keeps one credential per handler, and gives every
// [Vault.Select] a random one of the highest priority present. When the API
// server rejects a credential, [Vault.Invalidate] drops exactly that one.
//
// # Logging in
//
// When no usable credential is left, the next Select starts a login: every
// handler runs once, concurrently, however many callers are waiting, and the
// callers go on with the first credential that arrives. A handler that fails
// is retried according to its options (see the login package); while it
// retries, callers wait, each no longer than its own context. A login that
// ends without a credential gives the waiting callers a [*LoginError] that
// names every handler's outcome, and further logins of a failed handler are
// spaced by its exponential backoff (1 s doubling to 1 min by default): during
// the backoff, Select fails at once instead of waiting. A handler that heals
// is picked up at its next login, without a restart.
//
// # Expiry and refresh
//
// A credential with an expiration is handed out until its expiration less a
// leeway for clock skew ([Options.Leeway]). Before then, the vault reruns its
// handler in the background, when about a tenth of its life is left (at least
// 30 s, at most half of it, moved earlier by a random part of up to half that
// window), and keeps serving the old credential until the new one arrives. A
// failed refresh is retried with backoff; the old credential serves until it
// expires. In steady state, no caller ever waits for a login.
//
// # Rejected credentials
//
// The vault remembers the last few credentials of each handler that were
// invalidated ([Options.Remembered]), by a digest of their authentication
// material, and refuses a handler that returns one of them again: a token the
// server rejected does not come back in a loop.
//
// # Concurrency
//
// Select reads an immutable snapshot without a lock and allocates nothing;
// a change publishes a new snapshot. Every goroutine the vault starts ends by
// [Vault.Close], which also wakes waiting callers with [ErrClosed].
//
// # Secrets
//
// Log lines (through [Options.Logger], a logr.Logger) and errors name
// handlers, servers and credential fingerprints, never a token, password or
// private key; a [*Credential] prints redacted with every fmt verb.
package vault
