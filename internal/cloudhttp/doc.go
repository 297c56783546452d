// Package cloudhttp is the HTTP side that the native cloud logins (the
// modules under cloud/) share, for those modules only: a transport that
// binds a login's token requests to the login's context, and that notes
// what it saw so that a failed login can say what failed without quoting
// the cloud SDK's error text.
//
// # Why not the SDK's error text
//
// Cloud SDKs put the token endpoint's whole response body in their errors
// (oauth2's RetrieveError, the STS exchange's "status code 400: …",
// azidentity's AuthenticationFailedError). An endpoint that echoes its
// request — a misconfigured proxy, a stand-in, a faulty server — then puts
// the signed assertion, the subject token or the client secret in a log.
// A Recorder keeps only the method, the URL without its query or user
// info, the status, and the OAuth2 error code of a failed response, when it
// is a short word.
package cloudhttp
