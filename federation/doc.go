// Package federation reaches the members of a fleet with no stored
// credential: the hub mints a short-lived token for one of its
// ServiceAccounts (TokenRequest, through the hub's own vault), and the
// member trusts it, either its API server directly or its cloud's STS,
// which exchanges it.
//
// # Generic: a member that trusts the hub's issuer
//
// The member's kube-apiserver has an AuthenticationConfiguration
// (--authentication-config) with a jwt authenticator whose issuer is the
// hub's ServiceAccount issuer, with the hub's CA and the member's
// audience; the hub serves its discovery document and keys
// (/.well-known/openid-configuration, /openid/v1/jwks) to anonymous callers
// on those two paths. RBAC on the member grants the user the token maps to
// (its sub, with a prefix). docs/federation.md has the files.
//
//	hub, err := hubVault.RESTConfig(ctx) // the hub's own vault
//	…
//	member := vault.New(vault.Options{})
//	member.OnLogin(federation.Login(federation.Config{
//		Hub:       hub,
//		Namespace: "fleet-system", ServiceAccount: "fleet-operator",
//		Audiences: []string{"member-1"},
//		Member:    federation.Member{Server: "https://member-1.example:6443", CAData: ca},
//	}))
//
// # Limits
//
// Two limits come from the member, not from this package:
//
//   - A member caches the hub's keys up to an hour (the hub serves them
//     with max-age 3600, and the member refetches for an unknown key only
//     near that expiry). After the hub switches its signing key abruptly,
//     new tokens fail there for up to an hour: each new token is shown to
//     the member before it is given, so the vault serves the token in hand
//     while it lasts, and the login says the member does not trust the
//     hub's new key yet (tried again after the vault's backoff). Publish
//     the new key first and switch once the members have fetched it
//     (rewriting a member's authentication config reloads it in about
//     10 s, at its next token).
//   - A ServiceAccount deleted on the hub stops new tokens at once, but the
//     member accepts those already minted until they expire: it cannot ask
//     the hub. Config.Lifetime bounds that (TokenRequest's floor is ten
//     minutes).
//
// # What a token may reach
//
// A token is minted only for the member's audiences, never for the hub's
// own: its issuer, kubernetes.default.svc, and any audience the hub's API
// server takes (the first token is shown to the hub, which must refuse
// it), so that no member can replay it on the hub. It goes only to
// Member.Server over TLS verified with the member's CA, through no proxy
// of the member's choosing (the process's HTTPS_PROXY applies, as to every
// client), and no redirect is followed. Its value is in no log line,
// error, or printed form of Token. A login gives up after a minute,
// whatever the handler's timeout: a hub or member that never answers does
// not hold it.
package federation
