package gke

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/fleet"
)

// The ServiceAccount annotations the provider gcp of a Flux ConfigMap
// reads, as Flux does: the workload identity pool provider that trusts
// the hub's issuer, and a Google service account to impersonate.
const (
	providerAnnotation       = "gcp.auth.fluxcd.io/workload-identity-provider"
	serviceAccountAnnotation = "iam.gke.io/gcp-service-account"
)

// FluxOptions are this process's own settings for the Flux ConfigMaps of
// provider gcp. What differs per member (the pool provider, the service
// account) comes of each ConfigMap's ServiceAccount.
type FluxOptions struct {
	// WorkloadIdentityProvider is the pool provider of a ServiceAccount
	// with no gcp.auth.fluxcd.io/workload-identity-provider annotation,
	// in the annotation's form
	// (projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER).
	// Default: none, and such a ServiceAccount's member fails its login
	// (Flux asks GKE's metadata server for the pool of the cluster it
	// runs in; this process does not). GKE's own pool,
	// PROJECT_ID.svc.id.goog, is not in this form: the hub needs a pool
	// provider that trusts its issuer.
	WorkloadIdentityProvider string
	// Scopes, TokenURL and IAMCredentialsURL are FederatedOptions'. The
	// two URLs receive the hub's tokens: set them only from the process's
	// own configuration.
	Scopes                      []string
	TokenURL, IAMCredentialsURL string
}

// Flux serves the Flux ConfigMaps whose provider key is gcp, as Flux's gcp
// provider reads them (fleet.FluxOptions.Providers["gcp"]):
//
//   - the ServiceAccount's gcp.auth.fluxcd.io/workload-identity-provider
//     annotation names the workload identity pool provider that trusts the
//     hub's issuer (projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER),
//     where the hub's token is exchanged; the token is minted for its full
//     resource name (//iam.googleapis.com/projects/…), which a provider
//     with no allowed audiences takes, as Flux mints it, unless the
//     ConfigMap's audiences key names others;
//   - its iam.gke.io/gcp-service-account annotation, when set, is the
//     Google service account impersonated with the federated token
//     (FederatedOptions.ServiceAccount); without it the federated token is
//     the credential;
//   - the ConfigMap's address and ca.crt keys say where the token goes;
//     its cluster key is not read.
//
// An annotation that says neither right fails the member's login with an
// error that names it and what it must match; a change of the annotations
// serves at the next login.
func Flux(opts FluxOptions) fleet.FluxProvider {
	return fleet.FluxProvider{
		Audiences: func(sa *corev1.ServiceAccount) ([]string, error) {
			provider, err := opts.provider(sa)
			if err != nil {
				return nil, err
			}
			return []string{provider}, nil
		},
		New: func(_ context.Context, c fleet.FluxCluster) (federation.Provider, error) {
			provider, err := opts.provider(c.ServiceAccount)
			if err != nil {
				return nil, err
			}
			email, ok := c.ServiceAccount.Annotations[serviceAccountAnnotation]
			if ok && !serviceAccountEmail.MatchString(email) {
				return nil, fmt.Errorf("gke: ServiceAccount %s/%s: annotation %s is not a Google service account's email (an ID of 6 to 30 lowercase letters, digits and hyphens, a letter first, at PROJECT.iam.gserviceaccount.com; or a project's default compute account): %s",
					c.ServiceAccount.Namespace, c.ServiceAccount.Name, serviceAccountAnnotation, emailParts(email))
			}
			return Federated(FederatedOptions{Audience: provider, ServiceAccount: email, Scopes: opts.Scopes, TokenURL: opts.TokenURL, IAMCredentialsURL: opts.IAMCredentialsURL}), nil
		},
	}
}

// A pool provider's name, as the annotation has it, and a service
// account's email: a user-managed account's (an ID of 6 to 30 letters,
// digits and hyphens in a project of the same), or a project's default
// compute account.
var (
	poolProvider        = regexp.MustCompile(`^projects/[0-9]{1,30}/locations/global/workloadIdentityPools/[a-z0-9-]{4,32}/providers/[a-z0-9-]{4,32}$`)
	serviceAccountEmail = regexp.MustCompile(`^(?:[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com|[0-9]{1,30}-compute@developer\.gserviceaccount\.com)$`)
)

// provider is the full resource name of sa's pool provider.
func (o FluxOptions) provider(sa *corev1.ServiceAccount) (string, error) {
	const want = "projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER"
	name, ok := sa.Annotations[providerAnnotation]
	switch {
	case !ok && o.WorkloadIdentityProvider == "":
		return "", fmt.Errorf("gke: ServiceAccount %s/%s has no %s annotation, and gke.FluxOptions.WorkloadIdentityProvider names no default: the workload identity pool provider that trusts the hub", sa.Namespace, sa.Name, providerAnnotation)
	case !ok && !poolProvider.MatchString(o.WorkloadIdentityProvider):
		// The operator's to mend, not the ServiceAccount's writer's.
		return "", fmt.Errorf("gke: ServiceAccount %s/%s has no %s annotation, and its default, gke.FluxOptions.WorkloadIdentityProvider %q, is not a workload identity pool provider (%s)", sa.Namespace, sa.Name, providerAnnotation, quoted(o.WorkloadIdentityProvider), want)
	case !ok:
		name = o.WorkloadIdentityProvider
	case !poolProvider.MatchString(name):
		return "", fmt.Errorf("gke: ServiceAccount %s/%s: annotation %s %q is not a workload identity pool provider (%s)", sa.Namespace, sa.Name, providerAnnotation, quoted(name), want)
	}
	return "//iam.googleapis.com/" + name, nil
}

// emailParts quotes an email's account ID and domain apart: the vault's
// log redaction hides whatever stands right before an @, and the ID is
// where a refused email is most often wrong.
func emailParts(email string) string {
	at := strings.LastIndexByte(email, '@')
	if at < 0 {
		return fmt.Sprintf("%q has no @", quoted(email))
	}
	return fmt.Sprintf("account ID %q, domain %q", quoted(email[:at]), quoted(email[at+1:]))
}

// maxQuoted bounds the bytes an error quotes of a value someone else wrote.
const maxQuoted = 100

// quoted is s, cut to maxQuoted bytes.
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return strings.ToValidUTF8(s[:maxQuoted], "") + "…"
}
