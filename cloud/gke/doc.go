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
// # Federation
//
// Federated is the GKE provider of a fleet with no stored credential
// (package federation of the root module): the hub mints a token for one of
// its ServiceAccounts, and Google's STS exchanges it for a federated access
// token (golang.org/x/oauth2/google/externalaccount, the token as an OIDC
// JWT), which impersonates a Google service account when
// FederatedOptions.ServiceAccount names one. The member gets the Google
// token, with its own server and CA, until that token expires; each login
// mints a new hub token and exchanges it again.
//
//	provider := "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/fleet/providers/hub"
//	member.OnLogin(federation.Login(federation.Config{
//		Hub:       hub, // the hub's own vault's config
//		Namespace: "fleet-system", ServiceAccount: "fleet-operator",
//		Audiences: []string{gke.AllowedAudience(provider)},
//		Member:    federation.Member{Server: "https://34.118.0.10", CAData: clusterCA},
//		Provider: gke.Federated(gke.FederatedOptions{
//			Audience:       provider,
//			ServiceAccount: "fleet@my-project.iam.gserviceaccount.com", // optional
//		}),
//	}))
//
// Mint the hub's tokens for an audience the pool provider allows: with no
// allowed audiences configured, Google takes only AllowedAudience(provider),
// https://iam.googleapis.com/ followed by the provider's resource name.
//
// What each side trusts: the pool provider trusts the hub's ServiceAccount
// issuer for that audience, with the issuer's keys fetched by Google from
// its discovery document (reachable from the internet) or uploaded to the
// provider (a JWKS, replaced when the hub's keys change); its attribute
// condition or IAM bindings decide which subject
// (system:serviceaccount:NAMESPACE:NAME) gets anything; IAM grants the
// pool's principal for that subject either the cluster's roles directly or
// roles/iam.workloadIdentityUser on the service account to impersonate;
// the cluster's RBAC binds the principal or the service account's email.
// This process trusts FederatedOptions' endpoints, which receive the hub's
// token and the federated token, and the member's CA.
//
// A refusal of the hub's token by the STS (invalid_grant: its signature,
// issuer, audience or expiry; unauthorized_client: the attribute condition;
// invalid_target: no such provider; access_denied) wraps
// federation.ErrRejected, and the error quotes the STS's
// error_description. A refused impersonation (403 PERMISSION_DENIED) does
// not: the STS took the hub's token, and what is missing is a grant on the
// service account, which the error names; it is permanent for the login
// round, as every other 4xx. No answer, a 5xx, 408 and 429 are retried.
//
// # Errors
//
// A failed login names the cloud, the server and the credential source
// (the key's service account, the external account's audience, or the
// metadata server), and what failed: the token endpoint's method, URL,
// status and OAuth2 error code. Login never quotes the endpoint's answer:
// an endpoint that echoes its request would put the signed assertion or the
// subject token in a log. Federated quotes what Google says of a refusal
// (its error_description, or a Google API error's message), one line of at
// most 300 bytes, with the tokens its request carried, and any run shaped
// like a JWT or a Google access token, masked. A 4xx answer (a revoked key,
// an unknown audience) is permanent for the login round.
package gke
