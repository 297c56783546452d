// Package aks logs in to Azure Kubernetes Service clusters natively: the
// token is a Microsoft Entra ID access token for the AKS server
// application, fetched in process, with no kubelogin to run.
//
//	v.OnLogin(aks.Login(aks.Options{
//		Server: "https://prod-dns-1a2b3c.hcp.westeurope.azmk8s.io:443",
//		CAData: clusterCA, // from the cluster's kubeconfig
//	}))
//
// It is a module of its own (github.com/authvault/authvault/cloud/aks), so
// that the library's root module imports no Azure library. The guide
// docs/cloud.md in the repository shows the three clouds' logins side by
// side.
//
// # Credentials
//
// Options.Credential names the identity (any azcore.TokenCredential:
// azidentity's workload identity, managed identity, client secret or
// certificate credentials). None means azidentity's
// DefaultAzureCredential: a service principal from AZURE_CLIENT_ID,
// AZURE_TENANT_ID and AZURE_CLIENT_SECRET or a certificate, workload
// identity (AZURE_FEDERATED_TOKEN_FILE), managed identity, then the
// developer tools. The token's scope is the server application's ID
// followed by "/.default".
//
// # Fresh tokens
//
// As in the gke package: the vault is the cache, and only its first login
// may take the token the handler already has (while more than half its
// lifetime is left). Every other login — a refresh ahead of expiry, a
// rejection, an expiry — asks a new DefaultAzureCredential, whose token
// cache is empty, so the vault gets a new token and not the one it is
// replacing. A Credential given in Options is asked as it is: azidentity's
// credentials keep their token until 5 minutes before its end, so a refresh
// that comes earlier finds the token unchanged, and the vault asks again
// after its backoff, before the token ends.
//
// Native's logins (below) make a new credential of the kind the
// kubeconfig names for every login but a first one, as Login does with
// DefaultAzureCredential. For managed identity that is not enough: MSAL
// keeps managed identity tokens in one cache for the whole process, so
// Native's managed identity asks with a claims challenge ("a token issued
// from now on"), which MSAL does not answer from its cache. The endpoint
// is then asked as kubelogin, a new process each time, asks it; IMDS may
// still answer the token it has. (DefaultAzureCredential's managed
// identity shares that process-wide cache: there a refresh gets a new
// token only once MSAL's own refresh time has come.)
//
// # Kubeconfigs that run kubelogin
//
// With handlers.UseNative(aks.Native()), a kubeconfig whose user runs
// `kubelogin get-token` — as `kubelogin convert-kubeconfig` writes it — in
// a mode of a process with an identity of its own logs in in process,
// with the kubeconfig's server and CA, and no kubelogin runs:
//
//	--login msi               managed identity, system-assigned or --client-id / --identity-resource-id
//	--login workloadidentity  AKS workload identity: client, tenant, token file, authority host
//	--login spn               a service principal: client secret or certificate (PEM or PKCS#12)
//
// Flags and environment are read as kubelogin v0.2.22 reads them, the
// environment (the kubeconfig's, then this process's) winning over the
// flags unless --disable-environment-override says not to; the token's
// scope is --server-id followed by "/.default"; --environment names one of
// the clouds azidentity knows, anything else is an error.
//
// Not served, so those kubeconfigs run kubelogin as before: the modes that
// ask a person or a tool (devicecode, kubelogin's default, interactive,
// azurecli, azd, ropc, azurepipelines), workload identity from GitHub
// Actions, proof-of-possession tokens (--pop-enabled) and ADAL's
// (--legacy). In a served mode, an argument or a variable of the
// kubeconfig's environment this login does not understand is an error
// that names it, never its value, and no token is asked for.
//
// What is checked for a kubeconfig from elsewhere (a Secret, a fleet's
// cluster): nothing can be, so it is refused, whatever its plugin policy
// (handlers.AllowNative included). kubelogin names no cluster — the server
// ID is the same for every AKS cluster — so a token this process's
// identity gets for a Secret's kubeconfig would be good for every AKS
// cluster that identity may use, and its server, the Secret writer's
// choice, could replay it there. Such a kubeconfig can still run kubelogin
// itself where its policy allows that.
//
// # Federation: a fleet member with no stored credential
//
// Federated is the federation.Provider of an AKS member. The hub mints a
// token for one of its ServiceAccounts with the audience FederatedAudience
// (api://AzureADTokenExchange, or the one the federated identity credential
// names instead), and Federated presents it to Entra ID's token endpoint as
// the client assertion of an application (an app registration or a
// user-assigned managed identity) for the AKS server application. The
// member takes the access token as it takes any Entra ID token, and AKS
// RBAC or Azure RBAC decides what the application may do:
//
//	member.OnLogin(federation.Login(federation.Config{
//		Hub:       hub, // the config of the hub's own vault
//		Namespace: "fleet-system", ServiceAccount: "fleet-operator",
//		Audiences: []string{aks.FederatedAudience},
//		Member:    federation.Member{Server: server, CAData: clusterCA},
//		Provider:  aks.Federated(aks.FederatedOptions{TenantID: tenant, ClientID: app}),
//	}))
//
// Entra ID, not this process, decides whether the token is good: the
// application's federated identity credential names the hub's issuer
// (Entra ID fetches its discovery document and keys from the internet, so
// the issuer must be served over HTTPS with a publicly trusted
// certificate), the subject system:serviceaccount:<namespace>:<name>, and
// the audience. Each exchange makes a new azidentity credential, whose
// cache is empty: every login presents the token the hub has just minted.
//
// The access token is good on every AKS cluster that lets the application
// in: the server application is the same for all of them. Give each member
// an application (or managed identity) of its own, granted on that cluster
// only, so that a token sent to one member, or to a server a fleet source
// names wrongly, is worth nothing on another.
//
// A refusal of the hub's token wraps federation.ErrRejected and names
// Entra ID's code with what it means: no federated identity credential
// matches the token's issuer (AADSTS700211), audience (700212) or subject
// (700213, 7002138 when only the case differs), or the application has none
// (70025); the token is outside its time range (700024), is no valid JWT
// (50027), or its signature does not verify (700027); Entra ID could not
// fetch the issuer's keys (50166). Any other 4xx (an application or tenant
// Entra ID does not know) is permanent for the round; a 5xx, or no answer,
// is retried: by azcore first (FederatedOptions.CredentialOptions.Retry),
// then by the vault.
//
// # Errors
//
// A failed login names the cloud, the server and the credential source,
// and what failed: for an answer of Entra ID, its method, URL, status and
// OAuth2 error code (AADSTS numbers included), never its body, which an
// endpoint that echoes its request would fill with the client secret or the
// assertion. A 4xx answer is permanent for the login round. Other failures
// (no credential found) keep the SDK's own text, with the process's client
// secret and federated token masked.
package aks
