package flux_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/fluxcd/pkg/auth"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/testwait"
)

// cloudNS holds the cloud cases' ConfigMaps and ServiceAccounts, each
// annotated as the cloud's workload identity reads it.
const cloudNS = "clouds"

// cloudAccounts are the ServiceAccounts of cloudNS and their annotations:
// the identities the stand-ins know (cloudstandin_test.go), and some
// annotated as Flux's own tests annotate theirs, with values Flux takes
// and ours refuses.
var cloudAccounts = map[string]map[string]string{
	"irsa":        {"eks.amazonaws.com/role-arn": awsRole},
	"irsa10":      {"eks.amazonaws.com/role-arn": "arn:aws:iam::1234567890:role/some-role"},
	"wif":         {"gcp.auth.fluxcd.io/workload-identity-provider": gcpPool, "iam.gke.io/gcp-service-account": gcpAccount},
	"wifdirect":   {"gcp.auth.fluxcd.io/workload-identity-provider": gcpPool},
	"wifbad":      {"gcp.auth.fluxcd.io/workload-identity-provider": "invalid"},
	"wifbadmail":  {"gcp.auth.fluxcd.io/workload-identity-provider": gcpPool, "iam.gke.io/gcp-service-account": "not-an-email"},
	"wifshortid":  {"gcp.auth.fluxcd.io/workload-identity-provider": gcpPool, "iam.gke.io/gcp-service-account": "sa@project-id.iam.gserviceaccount.com"},
	"azwi":        {"azure.workload.identity/client-id": azureClient, "azure.workload.identity/tenant-id": azureTenant},
	"azcid":       {"azure.workload.identity/client-id": azureClient},
	"aztid":       {"azure.workload.identity/tenant-id": azureTenant},
	"azfluxnames": {"azure.workload.identity/client-id": "client-id", "azure.workload.identity/tenant-id": "tenant-id"},
	"plain":       nil,
}

// ourClouds are our cloud modules' Flux providers, pointed at the
// stand-ins as their options allow.
func ourClouds() map[string]fleet.FluxProvider {
	client := &http.Client{Transport: http.DefaultTransport} // trusts the stand-ins' CA (TestMain)
	return map[string]fleet.FluxProvider{
		"aws": eks.Flux(eks.FluxOptions{STSEndpoint: cloudNetwork.URL(), AWS: &aws.Config{HTTPClient: client}}),
		"gcp": gke.Flux(gke.FluxOptions{TokenURL: cloudNetwork.URL() + "/v1/token", IAMCredentialsURL: cloudNetwork.URL()}),
		"azure": aks.Flux(aks.FluxOptions{CredentialOptions: azidentity.ClientAssertionCredentialOptions{
			ClientOptions:            azcore.ClientOptions{Cloud: azcloud.Configuration{ActiveDirectoryAuthorityHost: cloudNetwork.URL() + "/"}, Transport: client},
			DisableInstanceDiscovery: true,
		}}),
	}
}

// putCloudAccounts creates cloudNS and its ServiceAccounts on the hub, once.
func putCloudAccounts(t testing.TB, e *env) {
	ctx := testwait.Context(t)
	if _, err := e.hubAdmin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cloudNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for name, annotations := range cloudAccounts {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
		if _, err := e.hubAdmin.CoreV1().ServiceAccounts(cloudNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// Flux's aws, gcp and azure providers (aws/gcp/azure provider_test.go:
// GetAudiences, GetIdentity, NewTokenForServiceAccount, NewRESTConfig,
// GetAccessTokenOptionsForCluster) and ours (eks.Flux, gke.Flux,
// aks.Flux), each reading one ConfigMap on the hub and exchanging the
// hub's token at the clouds' stand-ins: Flux's through the proxy, at the
// clouds' public hosts; ours at the stand-ins' own address. The member of
// the cases that serve is the hub itself, whose authenticator asks the
// stand-ins about their tokens (clouds.accept): the user is whom the
// cloud's token speaks for.
func TestCloudConfigMapSideBySide(t *testing.T) {
	e := setup(t)
	putCloudAccounts(t, e)
	const (
		arn        = "arn:aws:eks:" + awsRegion + ":123456789012:cluster/" + awsCluster
		otherARN   = "arn:aws:eks:eu-west-1:123456789012:cluster/" + awsCluster
		eksAddress = "https://EXAMPLE1234567890123456789012345678.gr7.us-east-1.eks.amazonaws.com:443"
		gkeCluster = "projects/test-project/locations/us-central1/clusters/test-cluster"
		aksCluster = "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/test-rg/providers/Microsoft.ContainerService/managedClusters/test-cluster"
		aadAud     = "api://AzureADTokenExchange"
	)
	member, ca := e.hub.Server, string(e.hub.CAData)
	cm := func(provider, sa string, kv ...string) map[string]string {
		m := map[string]string{"provider": provider, "address": member, "ca.crt": ca, "serviceAccountName": sa}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
				continue
			}
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	minted := func(sa, aud string) string { return cloudNS + "/" + sa + " for " + aud }
	served := func(user, sa, aud string) want { return want{user: user, minted: minted(sa, aud)} }
	refused := func(err, sa, aud string) want { return want{err: err, minted: minted(sa, aud)} }
	principal := "principal://iam.googleapis.com/projects/1234567890/locations/global/workloadIdentityPools/test-pool/subject/" + subject("wifdirect")
	for i, c := range []struct {
		name        string
		data        map[string]string
		fluxOptions []auth.Option
		flux, ours  want
	}{
		// aws
		{name: "aws NewRESTConfig/valid EKS cluster with address and CA: the role of the annotation, STS's region of the ARN",
			data: cm("aws", "irsa", "cluster", arn),
			flux: served(awsRole, "irsa", "sts.amazonaws.com"), ours: served(awsRole, "irsa", "sts.amazonaws.com")},
		{name: "aws GetAccessTokenOptionsForCluster: the region is the ARN's",
			// Both sign the token for eu-west-1; the member's cluster is
			// in us-east-1.
			data: cm("aws", "irsa", "cluster", otherARN),
			flux: refused("Unauthorized", "irsa", "sts.amazonaws.com"),
			// Ours says which credential the member refused.
			ours: refused("Unauthorized", "irsa", "sts.amazonaws.com")},
		{name: "aws: the audiences key, which STS's OIDC provider does not list",
			data: cm("aws", "irsa", "cluster", arn, "audiences", "custom"),
			flux: refused("InvalidIdentityToken", "irsa", "custom"), ours: refused("InvalidIdentityToken", "irsa", "custom")},
		{name: "aws NewRESTConfig/CA and address only: EKS requires the cluster",
			data: cm("aws", "irsa"),
			flux: want{err: "invalid EKS cluster ARN: ''"}, ours: want{err: "no cluster key"}},
		{name: "aws NewRESTConfig/invalid cluster ARN",
			data: cm("aws", "irsa", "cluster", "invalid-cluster-arn"),
			flux: want{err: "invalid EKS cluster ARN: 'invalid-cluster-arn'"}, ours: want{err: "is not an EKS cluster ARN"}},
		{name: "aws NewRESTConfig/valid EKS cluster: no address",
			data: cm("aws", "irsa", "cluster", arn, "address", "", "ca.crt", ""),
			// Flux exchanges, then asks EKS for the endpoint
			// (DescribeCluster, which the stand-in does not serve).
			flux: refused("failed to describe EKS cluster", "irsa", "sts.amazonaws.com"),
			// Ours on purpose: the token goes where the ConfigMap says.
			ours: want{err: "no address key"}},
		{name: "aws NewRESTConfig/address with no CA",
			data: cm("aws", "irsa", "cluster", arn, "address", eksAddress, "ca.crt", ""),
			// Flux asks EKS for the CA (DescribeCluster).
			flux: refused("failed to describe EKS cluster", "irsa", "sts.amazonaws.com"),
			// Ours takes the system's roots, as for any member; it cannot
			// reach the example address.
			ours: refused("dial tcp", "irsa", "sts.amazonaws.com")},
		{name: "aws GetIdentity: no role-arn annotation",
			data: cm("aws", "plain", "cluster", arn),
			// Neither mints: Flux reads the identity first (its cache key).
			flux: want{err: "invalid eks.amazonaws.com/role-arn annotation"},
			ours: want{err: "has no eks.amazonaws.com/role-arn annotation"}},
		{name: "aws GetIdentity: Flux's test role, in a 10-digit account",
			data: cm("aws", "irsa10", "cluster", arn),
			// Flux sends it to STS, which knows no such role.
			flux: refused("AccessDenied", "irsa10", "sts.amazonaws.com"),
			// Ours: an AWS account ID has 12 digits; refused before any
			// token is minted.
			ours: want{err: "is not an IAM role's ARN"}},
		{name: "aws NewTokenForServiceAccount/valid STS endpoint",
			data:        cm("aws", "irsa", "cluster", arn),
			fluxOptions: []auth.Option{auth.WithSTSEndpoint("https://sts." + awsRegion + ".amazonaws.com")},
			flux:        served(awsRole, "irsa", "sts.amazonaws.com"), ours: served(awsRole, "irsa", "sts.amazonaws.com")},
		{name: "aws NewTokenForServiceAccount/invalid STS endpoint",
			data:        cm("aws", "irsa", "cluster", arn),
			fluxOptions: []auth.Option{auth.WithSTSEndpoint("https://sts.example.com")},
			flux:        refused("invalid STS endpoint", "irsa", "sts.amazonaws.com"),
			// Ours has no per-object STS endpoint: eks.FluxOptions.STSEndpoint
			// is the process's own setting, not checked against AWS's hosts
			// (it is how this test reaches the stand-in).
			ours: served(awsRole, "irsa", "sts.amazonaws.com")},

		// gcp
		{name: "gcp NewTokenForServiceAccount/impersonation: the audience of the provider annotation",
			data: cm("gcp", "wif"),
			flux: served(gcpAccount, "wif", gcpAudience), ours: served(gcpAccount, "wif", gcpAudience)},
		{name: "gcp NewTokenForServiceAccount/direct access",
			data: cm("gcp", "wifdirect", "cluster", gkeCluster),
			flux: served(principal, "wifdirect", gcpAudience), ours: served(principal, "wifdirect", gcpAudience)},
		{name: "gcp: the audiences key, which the pool provider does not allow",
			data: cm("gcp", "wif", "audiences", "custom"),
			flux: refused("invalid_grant", "wif", "custom"), ours: refused("invalid_grant", "wif", "custom")},
		{name: "gcp GetAudiences: invalid workload identity provider",
			data: cm("gcp", "wifbad"),
			flux: want{err: "invalid gcp.auth.fluxcd.io/workload-identity-provider annotation"},
			ours: want{err: "is not a workload identity pool provider"}},
		{name: "gcp GetIdentity: invalid service account email",
			data: cm("gcp", "wifbadmail"),
			flux: want{err: "invalid iam.gke.io/gcp-service-account annotation"},
			ours: want{err: "is not a Google service account's email"}},
		{name: "gcp GetIdentity: an account ID of two letters",
			data: cm("gcp", "wifshortid"),
			// Flux exchanges and asks to impersonate it, which IAM refuses.
			flux: refused("PERMISSION_DENIED", "wifshortid", gcpAudience),
			// Ours: a service account's ID has 6 to 30 characters;
			// refused before the exchange.
			ours: want{err: "is not a Google service account's email"}},
		{name: "gcp GetAudiences: no provider annotation, out of GKE",
			data: cm("gcp", "plain", "audiences", gcpAudience),
			// Flux asks GKE's metadata server for the pool (none here).
			flux: refused("metadata", "plain", gcpAudience),
			// Ours asks no metadata server: gke.FluxOptions names the
			// default provider, and here none.
			ours: want{err: "has no gcp.auth.fluxcd.io/workload-identity-provider annotation"}},
		{name: "gcp NewRESTConfig/no address",
			data: cm("gcp", "wif", "cluster", gkeCluster, "address", "", "ca.crt", ""),
			// Flux exchanges, then asks GKE for the endpoint (GetCluster,
			// not served here).
			flux: refused("failed to describe GKE cluster", "wif", gcpAudience),
			ours: want{err: "no address key"}},

		// azure
		{name: "azure NewTokenForServiceAccount, NewRESTConfig/CA and address",
			data: cm("azure", "azwi", "cluster", aksCluster),
			flux: served(azureClient, "azwi", aadAud), ours: served(azureClient, "azwi", aadAud)},
		{name: "azure NewTokenForServiceAccount/tenant id missing",
			data: cm("azure", "azcid"),
			flux: want{err: "azure tenant ID is not set"},
			ours: want{err: "has no azure.workload.identity/tenant-id annotation"}},
		{name: "azure NewTokenForServiceAccount/client id missing",
			data: cm("azure", "aztid"),
			flux: want{err: "azure client ID is not set"},
			ours: want{err: "has no azure.workload.identity/client-id annotation"}},
		{name: "azure GetIdentity: Flux's test names, no GUIDs",
			data: cm("azure", "azfluxnames"),
			// Flux asks Entra ID, which knows no tenant "tenant-id".
			flux: refused("AADSTS90002", "azfluxnames", aadAud),
			// Ours: client and tenant IDs are GUIDs (or a tenant's domain);
			// refused before the exchange.
			ours: want{err: "is not a client ID (a GUID)"}},
		{name: "azure NewRESTConfig/address match: an address with no CA",
			data: cm("azure", "azwi", "cluster", aksCluster, "ca.crt", ""),
			// Flux exchanges twice (the AKS and the ARM scope) and asks ARM
			// for the cluster's kubeconfigs, to match the address (not
			// served here).
			flux: refused("failed to describe AKS cluster", "azwi", aadAud),
			// Ours takes the system's roots, as for any member.
			ours: refused("x509", "azwi", aadAud)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cm := configMap{ns: cloudNS, name: fmt.Sprintf("cloud-%02d", i), data: c.data,
				fluxOptions: append([]auth.Option{auth.WithProxyURL(cloudNetwork.ProxyURL())}, c.fluxOptions...)}
			put(t, e, cm)
			c.flux.check(t, "flux", viaFlux(t, e, cm, &mints{}))
			c.ours.check(t, "authvault", viaOurs(t, e, cm, &mints{}, fleet.FluxOptions{Providers: ourClouds()}))
		})
	}
}
