package flux_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fluxcd/pkg/auth"
	"github.com/fluxcd/pkg/auth/utils"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

// cloudNS holds the cloud cases' ConfigMaps and ServiceAccounts, each
// annotated as the cloud's workload identity reads it (the values of
// Flux's own tests).
const cloudNS = "clouds"

var cloudAccounts = map[string]map[string]string{
	"irsa":  {"eks.amazonaws.com/role-arn": "arn:aws:iam::1234567890:role/some-role"},
	"wif":   {"gcp.auth.fluxcd.io/workload-identity-provider": "projects/1234567890/locations/global/workloadIdentityPools/test-pool/providers/test-provider", "iam.gke.io/gcp-service-account": "test-sa@project-id.iam.gserviceaccount.com"},
	"azwi":  {"azure.workload.identity/client-id": "client-id", "azure.workload.identity/tenant-id": "tenant-id"},
	"azcid": {"azure.workload.identity/client-id": "client-id"},
	"plain": nil,
}

// standIn stands in for a cloud module's federated provider on our side:
// it records the FluxCluster the fleet gives it and exchanges nothing.
type standIn struct {
	mu  sync.Mutex // guards got
	got []fleet.FluxCluster
}

var errStandIn = errors.New("stand-in provider: recorded, no exchange (the cloud module's provider is not here yet)")

func (s *standIn) provider(audiences ...string) fleet.FluxProvider {
	return fleet.FluxProvider{Audiences: func(*corev1.ServiceAccount) ([]string, error) { return audiences, nil }, New: func(_ context.Context, c fleet.FluxCluster) (federation.Provider, error) {
		s.mu.Lock()
		s.got = append(s.got, c)
		s.mu.Unlock()
		return federation.ProviderFunc(func(context.Context, federation.Token, federation.Member) (*login.ConnectionInfo, error) {
			return nil, errStandIn
		}), nil
	}}
}

// The ConfigMap layer of Flux's aws, gcp and azure providers
// (aws/gcp/azure provider_test.go: GetAudiences, GetIdentity,
// GetAccessTokenOptionsForCluster, the ConfigMap keys of NewRESTConfig):
// which ServiceAccount is minted for, for which audiences, and what reaches
// the exchange. Flux's side stops at its TokenRequest; ours has a stand-in
// provider. The exchange cases wait for the cloud modules' providers.
func TestCloudConfigMapSideBySide(t *testing.T) {
	e := setup(t)
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
	const (
		arn        = "arn:aws:eks:us-east-1:123456789012:cluster/test-cluster"
		eksAddress = "https://EXAMPLE1234567890123456789012345678.gr7.us-east-1.eks.amazonaws.com:443"
		gke        = "projects/test-project/locations/us-central1/clusters/test-cluster"
		gkeAddress = "https://203.0.113.10:443"
		aks        = "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/test-rg/providers/Microsoft.ContainerService/managedClusters/test-cluster"
		aksAddress = "https://test-cluster-12345678.hcp.eastus.azmk8s.io:443"
		wifAud     = "//iam.googleapis.com/projects/1234567890/locations/global/workloadIdentityPools/test-pool/providers/test-provider"
	)
	// The audiences each FluxProvider says when a ConfigMap names none:
	// Flux's GetAudiences, but for gcp, whose audience Flux reads from the
	// ServiceAccount's annotation (or, in GKE, from the metadata server);
	// FluxProvider.Audiences cannot depend on the ServiceAccount, so the
	// GKE pool Flux's "gke" case expects stands here.
	defaults := map[string]string{"aws": "sts.amazonaws.com", "gcp": "project-id.svc.id.goog", "azure": "api://AzureADTokenExchange"}
	minted := func(sa, aud string) string { return cloudNS + "/" + sa + " for " + aud }
	stopped := func(sa, aud string) want { return want{err: errStopped.Error(), minted: minted(sa, aud)} }
	exchanged := func(sa, aud string) want { return want{err: errStandIn.Error(), minted: minted(sa, aud)} }
	for i, c := range []struct {
		name     string
		data     map[string]string
		flux     want
		ours     want
		identity string // Flux's GetIdentity of the ServiceAccount; ours hands the provider one with the same
		cluster  string // the cluster key our provider is given
	}{
		{name: "aws GetAudiences, NewRESTConfig/valid EKS cluster with address match",
			data: map[string]string{"provider": "aws", "cluster": arn, "address": eksAddress, "serviceAccountName": "irsa"},
			flux: stopped("irsa", "sts.amazonaws.com"), ours: exchanged("irsa", "sts.amazonaws.com"),
			identity: "arn:aws:iam::1234567890:role/some-role", cluster: arn},
		{name: "aws: the audiences key",
			data: map[string]string{"provider": "aws", "cluster": arn, "address": eksAddress, "serviceAccountName": "irsa", "audiences": "custom"},
			flux: stopped("irsa", "custom"), ours: exchanged("irsa", "custom"),
			identity: "arn:aws:iam::1234567890:role/some-role", cluster: arn},
		{name: "aws NewRESTConfig/CA and address only: EKS requires the cluster",
			data: map[string]string{"provider": "aws", "address": eksAddress, "ca.crt": e.ca, "serviceAccountName": "irsa"},
			flux: want{err: "invalid EKS cluster ARN: ''"},
			// Ours: the cluster key is the provider's to require (remains
			// to port with cloud/eks).
			ours:     exchanged("irsa", "sts.amazonaws.com"),
			identity: "arn:aws:iam::1234567890:role/some-role"},
		{name: "aws NewRESTConfig/invalid cluster ARN",
			data:     map[string]string{"provider": "aws", "cluster": "invalid-cluster-arn", "address": eksAddress, "serviceAccountName": "irsa"},
			flux:     want{err: "invalid EKS cluster ARN: 'invalid-cluster-arn'"},
			ours:     exchanged("irsa", "sts.amazonaws.com"),
			identity: "arn:aws:iam::1234567890:role/some-role", cluster: "invalid-cluster-arn"},
		{name: "aws NewRESTConfig/valid EKS cluster: no address",
			data: map[string]string{"provider": "aws", "cluster": arn, "serviceAccountName": "irsa"},
			// Flux would look the address up (DescribeCluster) after the
			// exchange; ours on purpose: the token goes where the ConfigMap
			// says.
			flux: stopped("irsa", "sts.amazonaws.com"), ours: want{err: "no address key"}},
		{name: "aws GetIdentity: no role-arn annotation",
			data:    map[string]string{"provider": "aws", "cluster": arn, "address": eksAddress, "serviceAccountName": "plain"},
			flux:    want{err: "invalid eks.amazonaws.com/role-arn annotation"},
			ours:    exchanged("plain", "sts.amazonaws.com"),
			cluster: arn},
		{name: "gcp GetAudience/federation: the audience from the ServiceAccount",
			data: map[string]string{"provider": "gcp", "cluster": gke, "address": gkeAddress, "serviceAccountName": "wif"},
			flux: stopped("wif", wifAud),
			// Ours differs: FluxProvider.Audiences is one list for every
			// ServiceAccount (a gap for cloud/gke; the audiences key serves).
			ours:     exchanged("wif", "project-id.svc.id.goog"),
			identity: "test-sa@project-id.iam.gserviceaccount.com", cluster: gke},
		{name: "gcp GetIdentity/direct access, the audiences key",
			data: map[string]string{"provider": "gcp", "cluster": gke, "address": gkeAddress, "serviceAccountName": "plain", "audiences": wifAud},
			flux: stopped("plain", wifAud), ours: exchanged("plain", wifAud), cluster: gke},
		{name: "gcp NewRESTConfig/CA and address only",
			data: map[string]string{"provider": "gcp", "address": gkeAddress, "ca.crt": e.ca, "serviceAccountName": "wif", "audiences": wifAud},
			flux: stopped("wif", wifAud), ours: exchanged("wif", wifAud),
			identity: "test-sa@project-id.iam.gserviceaccount.com"},
		{name: "azure GetAudiences, GetIdentity",
			data: map[string]string{"provider": "azure", "cluster": aks, "address": aksAddress, "serviceAccountName": "azwi"},
			flux: stopped("azwi", "api://AzureADTokenExchange"), ours: exchanged("azwi", "api://AzureADTokenExchange"),
			identity: "tenant-id/client-id", cluster: aks},
		{name: "azure NewTokenForServiceAccount/tenant id missing",
			data: map[string]string{"provider": "azure", "cluster": aks, "address": aksAddress, "serviceAccountName": "azcid"},
			flux: want{err: "azure tenant ID is not set"},
			// Ours: the annotations are the provider's to require (remains
			// to port with cloud/aks).
			ours: exchanged("azcid", "api://AzureADTokenExchange"), cluster: aks},
		{name: "azure NewRESTConfig/CA and address only",
			data: map[string]string{"provider": "azure", "address": aksAddress, "ca.crt": e.ca, "serviceAccountName": "azwi"},
			flux: stopped("azwi", "api://AzureADTokenExchange"), ours: exchanged("azwi", "api://AzureADTokenExchange"),
			identity: "tenant-id/client-id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cm := configMap{ns: cloudNS, name: fmt.Sprintf("cloud-%02d", i), data: c.data}
			put(t, e, cm)
			c.flux.check(t, "flux", viaFlux(t, e, cm, &mints{stop: true}))

			s := &standIn{}
			p := c.data["provider"]
			opts := fleet.FluxOptions{Operator: operatorNS + "/" + operatorSA, Providers: map[string]fleet.FluxProvider{p: s.provider(defaults[p])}}
			c.ours.check(t, "authvault", viaOurs(t, e, cm, &mints{}, opts))
			s.mu.Lock()
			defer s.mu.Unlock()
			if c.ours.err != errStandIn.Error() {
				if len(s.got) != 0 {
					t.Errorf("authvault: the provider was given %d clusters, want none", len(s.got))
				}
				return
			}
			if len(s.got) == 0 {
				t.Fatal("authvault: the provider was given no cluster")
			}
			got := s.got[0]
			if got.Cluster != c.cluster || got.Member.Server != c.data["address"] || got.ConfigMap != cloudNS+"/"+cm.name {
				t.Errorf("authvault: the provider got cluster %q at %q from %s, want %q at %q from %s/%s",
					got.Cluster, got.Member.Server, got.ConfigMap, c.cluster, c.data["address"], cloudNS, cm.name)
			}
			flux, err := utils.ProviderByName[auth.Provider](p)
			if err != nil {
				t.Fatal(err)
			}
			if id, err := flux.GetIdentity(*got.ServiceAccount); c.identity != "" && (err != nil || id != c.identity) {
				t.Errorf("authvault: Flux's identity of the ServiceAccount our provider got: %q, %v; want %q", id, err, c.identity)
			}
		})
	}
}
