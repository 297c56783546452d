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
// that the library's root module imports no Azure library.
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
