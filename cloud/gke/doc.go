// Package gke logs in to Google Kubernetes Engine clusters natively: the
// token is a Google OAuth2 access token from the process's Google
// identity, fetched in process, with no gke-gcloud-auth-plugin to run.
//
//	v.OnLogin(gke.Login(gke.Options{
//		Server: "https://34.118.0.10",
//		CAData: clusterCA, // the cluster's masterAuth.clusterCaCertificate
//	}))
//
// It is a module of its own (github.com/authvault/authvault/cloud/gke), so
// that the library's root module imports no Google library. The guide
// docs/cloud.md in the repository shows the three clouds' logins side by
// side.
//
// # Credentials
//
// Options.Credentials or Options.CredentialsJSON name the identity; neither
// means Application Default Credentials, as golang.org/x/oauth2/google
// finds them: the file that GOOGLE_APPLICATION_CREDENTIALS names (a
// service-account key, or an external_account file for workload identity
// federation from another cloud), gcloud's well-known file, or the
// metadata server (GKE workload identity, Compute Engine).
//
// # Fresh tokens
//
// The vault is the cache: it calls the handler for a first login, a refresh
// ahead of expiry, a rejection or an expiry, and only a first login can use
// a token the handler already has. The handler keeps the last token it
// fetched and hands it to a first login (another vault's, such as a fleet's
// clusters under one Google identity) while more than half its lifetime is
// left; every other login fetches a new token. Reusing oauth2's own cached
// source instead would give a refresh the token it is replacing until that
// token is seconds from its end, so the vault would find it unchanged,
// again and again, and its callers would meet the expiry.
//
// A token request is bound to the login's context, so a canceled login ends
// at once. The one exception is the metadata server, which the oauth2
// library asks without a context: the server answers from its own cache,
// and it decides when a token is new.
//
// # Errors
//
// A failed login names the cloud, the server and the credential source
// (the key's service account, the external account's audience, or the
// metadata server), and what failed: the token endpoint's method, URL,
// status and OAuth2 error code. It never quotes the endpoint's answer: an
// endpoint that echoes its request would put the signed assertion or the
// subject token in a log. A 4xx answer (a revoked key, an unknown audience)
// is permanent for the login round.
package gke
