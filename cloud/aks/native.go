package aks

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// transport is the HTTP client of the credentials Native makes: nil for
// azcore's own; the tests' stand-in of Entra ID otherwise.
var transport policy.Transporter

// Native is the AKS login for handlers.UseNative: kubeconfigs whose user
// runs `kubelogin get-token` (as `kubelogin convert-kubeconfig` writes
// them) in a mode of a process with an identity of its own log in in
// process, with the kubeconfig's server and CA:
//
//	kubelogin get-token --login msi --server-id S [--client-id C | --identity-resource-id R]
//	kubelogin get-token --login workloadidentity --server-id S [--client-id C] [--tenant-id T]
//		[--federated-token-file F] [--authority-host H]
//	kubelogin get-token --login spn --server-id S --client-id C --tenant-id T
//		[--client-secret X | --client-certificate F [--client-certificate-password P]]
//
// with --environment, --authority-host, --disable-instance-discovery,
// --timeout, --disable-environment-override and --use-azurerm-env-vars as
// kubelogin v0.2.22 reads them (flags as `--flag value` or `--flag=value`),
// and kubelogin's environment: AAD_LOGIN_METHOD, AZURE_CLIENT_ID,
// AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST, the
// client secret and certificate variables (AAD_SERVICE_PRINCIPAL_*,
// AZURE_CLIENT_*, ARM_*), from the kubeconfig or from this process. As in
// kubelogin, a variable that is set wins over its flag. The token's scope
// is the server ID followed by "/.default"; --environment names a cloud
// azidentity knows (public, US government, China).
//
// kubelogin's other modes (devicecode, its default, interactive, azurecli,
// azd, ropc, azurepipelines), proof-of-possession tokens (--pop-enabled)
// and ADAL's (--legacy) are not served: those kubeconfigs run the plugin as
// before. In a served mode, any other argument, or any other variable in
// the kubeconfig's environment, is an error that names it: a parameter is
// never ignored. (Where kubelogin keeps its cache, --cache-dir, and klog's
// -v change nothing of the token, and are taken.)
//
// Every login other than a first one makes a new credential, so the vault
// gets a new token (see "Fresh tokens" in the package doc).
//
// A kubeconfig someone else wrote (a Secret) may not use it, even when its
// policy names it: kubelogin names no cluster — the server ID is the same
// for every AKS cluster — so nothing can check that the server the
// kubeconfig names is the cluster a token is meant for, and the token
// would be replayable there.
func Native() handlers.Native {
	var cache sync.Map // what a kubeconfig asks for → login.Handler, so a kept token serves the next first login
	return handlers.Native{
		Name:   "aks",
		Serves: serves,
		Handler: func(req handlers.NativeRequest) (login.Handler, error) {
			if req.Untrusted {
				return nil, errors.New("aks: a kubeconfig from elsewhere may not use the native AKS login: kubelogin names no cluster (the server ID is the same for every AKS cluster), so nothing can check that its server is the cluster a token is for")
			}
			g, err := readGetToken(req.Exec)
			if err != nil {
				return nil, fmt.Errorf("aks: kubelogin get-token: %w", err)
			}
			opts := Options{Server: req.Cluster.Server, CAData: req.Cluster.CAData, ServerID: g.serverID}
			if len(opts.CAData) == 0 && req.Cluster.CAPath != "" {
				if opts.CAData, err = os.ReadFile(req.Cluster.CAPath); err != nil {
					return nil, fmt.Errorf("aks: the cluster's CA: %w", err)
				}
			}
			if len(opts.CAData) == 0 || req.Cluster.Insecure {
				// As Login: an Entra ID token is never sent to a server this
				// process cannot verify.
				return nil, fmt.Errorf("aks: the kubeconfig's cluster %s has no CA to verify it with", redact.URL(opts.Server))
			}
			key := sha256.Sum256(fmt.Appendf(nil, "%q|%q|%+v", opts.Server, opts.CAData, *g))
			if h, ok := cache.Load(key); ok {
				return h.(login.Handler), nil
			}
			h, _ := cache.LoadOrStore(key, g.login(opts))
			return h.(login.Handler), nil
		},
	}
}

// login is Login for opts with g's identity: a new credential for each
// token, within g's timeout.
func (g *getToken) login(opts Options) login.Handler {
	s := newSource(opts, time.Now)
	s.scope = g.scope()
	s.newCred = func() (azcore.TokenCredential, string, error) {
		cred, err := g.credential()
		return cred, g.describe(), err
	}
	s.secrets = g.secrets
	return func(ctx context.Context) (*login.ConnectionInfo, error) {
		ctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		return s.login(ctx)
	}
}

// credential is a new azidentity credential for g's identity, its token
// cache empty.
func (g *getToken) credential() (azcore.TokenCredential, error) {
	c, err := g.cloud()
	if err != nil {
		return nil, err
	}
	opts := azcore.ClientOptions{Cloud: c, Transport: transport}
	switch g.mode {
	case modeMSI:
		var id azidentity.ManagedIDKind
		if g.clientID != "" {
			id = azidentity.ClientID(g.clientID)
		} else if g.identityResourceID != "" {
			id = azidentity.ResourceID(g.identityResourceID)
		}
		cred, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ClientOptions: opts, ID: id})
		if err != nil {
			return nil, err
		}
		return uncachedMSI{cred: cred, now: time.Now}, nil
	case modeWorkloadIdentity:
		return azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions: opts, ClientID: g.clientID, TenantID: g.tenantID, TokenFilePath: g.tokenFile,
			DisableInstanceDiscovery: g.noDiscovery,
		})
	}
	if g.clientCert == "" {
		return azidentity.NewClientSecretCredential(g.tenantID, g.clientID, g.clientSecret,
			&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: g.noDiscovery})
	}
	data, err := os.ReadFile(g.clientCert)
	if err != nil {
		return nil, fmt.Errorf("the client certificate: %w", err)
	}
	certs, key, err := azidentity.ParseCertificates(data, []byte(g.clientCertPassword))
	if err != nil {
		// Its text names no part of the file.
		return nil, fmt.Errorf("the client certificate %s: %w", g.clientCert, err)
	}
	return azidentity.NewClientCertificateCredential(g.tenantID, g.clientID, certs, key,
		&azidentity.ClientCertificateCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: g.noDiscovery, SendCertificateChain: true})
}

// secrets are g's secrets, to mask in the SDK's text: the client secret,
// the certificate's password and the federated token.
func (g *getToken) secrets() []string {
	s := []string{g.clientSecret, g.clientCertPassword}
	if g.tokenFile != "" {
		if b, err := os.ReadFile(g.tokenFile); err == nil {
			s = append(s, strings.TrimSpace(string(b)))
		}
	}
	return s
}

// uncachedMSI asks the managed identity endpoint on every call. MSAL keeps
// managed identity tokens in one cache for the whole process, which a new
// credential does not empty, and passes it by only for a claims challenge:
// this one is Entra ID's own for a token revoked, "a token issued from now
// on". The endpoint is then asked as kubelogin, a new process each time,
// asks it. (IMDS itself may still answer the token it has.)
type uncachedMSI struct {
	cred *azidentity.ManagedIdentityCredential
	now  func() time.Time
}

func (m uncachedMSI) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if o.Claims == "" {
		o.Claims = fmt.Sprintf(`{"access_token":{"nbf":{"essential":true,"value":"%d"}}}`, m.now().Unix())
	}
	return m.cred.GetToken(ctx, o)
}
