// Package login describes credentials and the handlers that fetch them: a
// handler of your own is how a vault logs in with what only your program
// knows how to get (a secret store, a cloud API, a token service).
//
//	func fromStore(ctx context.Context) (*login.ConnectionInfo, error) {
//		tok, err := store.Token(ctx, "prod-eu")
//		if err != nil {
//			return nil, err // retried with backoff
//		}
//		return &login.ConnectionInfo{Server: "https://10.0.0.1:6443", CAData: caPEM, Token: tok}, nil
//	}
//
//	v.OnLogin(fromStore, login.ID("secret-store"), login.Retries(3), login.Timeout(30*time.Second))
//
// A [Handler] is a function that logs in somewhere and returns a
// [ConnectionInfo]: the API server, how to trust it, and how to authenticate
// (a token, basic auth, a client certificate, or a round tripper that does it
// by itself). The vault package runs handlers, keeps what they return, and
// reruns them when their credentials expire or are rejected. The guide
// docs/vault.md in the repository shows handlers beside the built-in ones.
//
// # Handlers and their options
//
// Options given when a handler is registered ([ID], [Retries], [Backoff],
// [Timeout]) say how it is retried. A handler signals how a failure should be
// treated by the error it returns:
//
//   - (nil, nil): nothing to offer; not retried until the next login.
//   - [Permanent](err): retrying will not help; not retried this round.
//   - [Temporary](err, delay): retry after delay.
//   - any other error: retry after the handler's backoff.
//
// A handler that panics fails its attempt with a [*PanicError], which prints
// the panic value's type, never its content; the process goes on.
//
// # Names
//
// Without [ID], a handler made by [Named] goes by the name it was given, in
// logs, errors and credentials, and by its short label in metrics; every
// handler of this module and of its cloud modules is made that way ("token
// file /var/run/secrets/tokens/api", label "token file"). Any other handler
// goes by its function's name. [ID] names a handler in all of these.
//
// # When to be asked again
//
// A credential's [ConnectionInfo.Expiration] says when it stops working: the
// vault asks its handler for the next one before then. A handler that
// re-reads a source (a file, a store) says how soon to ask again with
// [ConnectionInfo.RefreshAfter], without inventing an expiration; a
// credential given again unchanged serves on, logged at V(1) only.
//
// # Why a handler runs
//
// The vault calls a handler with a context that says why ([ReasonFrom]): its
// first login, a refresh before expiry, a reread its RefreshAfter asked
// for, an expired credential, a TLS verification failure against its
// server (a rotated CA: give the new one), or a credential the server
// rejected, with the response's status code and WWW-Authenticate header.
// A handler that caches can skip its cache after a rejection or a TLS
// failure; the vault logs the reason with each login.
//
// # Secrets
//
// Every way of printing a ConnectionInfo (fmt's verbs, String, GoString,
// encoding/json, logr) redacts Token, Password and PrivateKeyData and shows a
// [ConnectionInfo.Fingerprint] in their place, so a credential can be followed
// through logs without being revealed. The user info of Server and ProxyURL
// (a proxy's user name and password, in any form: "http://u:p@h",
// "u:p@h", "//u:p@h", with a bad port or scheme) is printed as "[redacted]",
// and so is every URL's user info in Validate's errors, including the
// url.Parse errors they wrap.
//
// # Data fields
//
// CAData, CertificateData and PrivateKeyData take PEM, or base64 of PEM as
// kubeconfig files carry it.
// [ConnectionInfo.Validate] reports what is missing or inconsistent, naming
// the field: among others a Token, Username, Password or Scheme that holds a
// control character (CR, LF, NUL…), which net/http would refuse to send.
package login
