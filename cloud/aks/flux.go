package aks

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	corev1 "k8s.io/api/core/v1"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/fleet"
)

// The ServiceAccount annotations the provider azure of a Flux ConfigMap
// reads, as Azure Workload Identity and Flux do: the application whose
// federated identity credential trusts the hub, and its tenant.
const (
	clientIDAnnotation = "azure.workload.identity/client-id"
	tenantIDAnnotation = "azure.workload.identity/tenant-id"
)

// FluxOptions are this process's own settings for the Flux ConfigMaps of
// provider azure. What differs per member (the application, its tenant)
// comes of each ConfigMap's ServiceAccount.
type FluxOptions struct {
	// TenantID is the tenant of a ServiceAccount with no
	// azure.workload.identity/tenant-id annotation. Default: none, and
	// such a ServiceAccount's member fails its login, as with Flux.
	TenantID string
	// ServerID and CredentialOptions are FederatedOptions': the AKS server
	// application (default: DefaultServerID), and the credential's cloud
	// (a sovereign cloud's authority host), HTTP client and retries.
	ServerID          string
	CredentialOptions azidentity.ClientAssertionCredentialOptions
}

// Flux serves the Flux ConfigMaps whose provider key is azure, as Flux's
// azure provider reads them (fleet.FluxOptions.Providers["azure"]):
//
//   - the ServiceAccount's azure.workload.identity/client-id annotation is
//     the application (client) ID, or a user-assigned managed identity's
//     client ID, whose federated identity credential names the hub's
//     issuer, the ServiceAccount's subject and the token's audience;
//   - its azure.workload.identity/tenant-id annotation is the tenant
//     (default: FluxOptions.TenantID);
//   - the hub's token, minted for FederatedAudience unless the
//     ConfigMap's audiences key names others, is presented to Entra ID as
//     that application's client assertion for the AKS server
//     application's scope (Federated);
//   - the ConfigMap's address and ca.crt keys say where the access token
//     goes; its cluster key is not read.
//
// An annotation missing or not an ID fails the member's login with an
// error that names it; a change of the annotations serves at the next
// login.
func Flux(opts FluxOptions) fleet.FluxProvider {
	return fleet.FluxProvider{
		Audiences: func(*corev1.ServiceAccount) ([]string, error) { return []string{FederatedAudience}, nil },
		New: func(_ context.Context, c fleet.FluxCluster) (federation.Provider, error) {
			sa := c.ServiceAccount
			name := sa.Namespace + "/" + sa.Name
			client, ok := sa.Annotations[clientIDAnnotation]
			if !ok {
				return nil, fmt.Errorf("aks: ServiceAccount %s has no %s annotation: the application whose federated identity credential trusts the hub", name, clientIDAnnotation)
			}
			if !guid.MatchString(client) {
				return nil, fmt.Errorf("aks: ServiceAccount %s: annotation %s %q is not a client ID (a GUID)", name, clientIDAnnotation, quoted(client))
			}
			tenant, ok := sa.Annotations[tenantIDAnnotation]
			isTenant := func(s string) bool { return guid.MatchString(s) || tenantDomain.MatchString(s) }
			switch {
			case !ok && opts.TenantID == "":
				return nil, fmt.Errorf("aks: ServiceAccount %s has no %s annotation, and aks.FluxOptions.TenantID names no default", name, tenantIDAnnotation)
			case !ok && !isTenant(opts.TenantID):
				// The operator's to mend, not the ServiceAccount's writer's.
				return nil, fmt.Errorf("aks: ServiceAccount %s has no %s annotation, and its default, aks.FluxOptions.TenantID %q, is not a tenant ID (a GUID) or domain", name, tenantIDAnnotation, quoted(opts.TenantID))
			case !ok:
				tenant = opts.TenantID
			case !isTenant(tenant):
				return nil, fmt.Errorf("aks: ServiceAccount %s: annotation %s %q is not a tenant ID (a GUID) or domain", name, tenantIDAnnotation, quoted(tenant))
			}
			return Federated(FederatedOptions{TenantID: tenant, ClientID: client, ServerID: opts.ServerID, CredentialOptions: opts.CredentialOptions}), nil
		},
	}
}

// An Entra ID object's GUID, and a tenant's domain name (contoso.onmicrosoft.com).
var (
	guid         = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	tenantDomain = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,63}$`)
)

// maxQuoted bounds the bytes an error quotes of a value someone else wrote.
const maxQuoted = 100

// quoted is s, cut to maxQuoted bytes.
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return strings.ToValidUTF8(s[:maxQuoted], "") + "…"
}
