// Package loginhttp is what a login that asks a token endpoint over HTTP
// needs to fail safely: an error that says which request failed and how
// (method, URL, status, OAuth2 error code), never the SDK's own error text,
// which may quote the endpoint's whole answer.
//
//	rec := &loginhttp.Recorder{Ctx: ctx} // the SDK's HTTP client sends through rec
//	tok, err := fetchToken(&http.Client{Transport: rec})
//	if err != nil {
//		text, cause, permanent := loginhttp.Failure(ctx, rec, err)
//		if cause != nil {
//			return nil, fmt.Errorf("mylogin: no token: %w", cause) // the login's context ended
//		}
//		failed := errors.New("mylogin: no token: " + text)
//		if permanent {
//			return nil, login.Permanent(failed)
//		}
//		return nil, failed
//	}
//
// The cloud logins of this repository (cloud/gke, cloud/aks) are built on it;
// it is exported for them and for logins like them (docs/vault.md in the
// repository shows it beside the redact package).
//
// # Why not the SDK's error text
//
// Cloud SDKs put the token endpoint's whole response body in their errors
// (oauth2's RetrieveError, the STS exchange's "status code 400: …",
// azidentity's AuthenticationFailedError). An endpoint that echoes its
// request — a misconfigured proxy, a stand-in, a faulty server — then puts
// the signed assertion, the subject token or the client secret in a log.
// A [Recorder] keeps only the method, the URL without its query or user
// info, the status, and the OAuth2 error code of a failed response, when it
// is a short word; [Failure] makes a login's error text of that.
//
// # Permanent or not
//
// A 4xx other than 408 and 429 says that asking again will not help
// ([PermanentStatus]): a login returns such a failure as login.Permanent, so
// the vault does not retry it until its next login. Everything else (no
// answer, a 5xx, an answer without a usable token) is worth retrying.
package loginhttp
