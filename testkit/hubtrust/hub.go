package hubtrust

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/testkit/testcluster"
)

// Hub is a real hub: an API server whose ServiceAccount tokens a cloud's
// stand-in trusts.
type Hub struct {
	Cluster *testcluster.Cluster
	// Issuer is its ServiceAccount issuer, the iss of its tokens.
	Issuer string
	// Namespace and ServiceAccount name the ServiceAccount the tokens are
	// minted for.
	Namespace, ServiceAccount string
}

// StartHub starts a hub with the ServiceAccount fleet-system/fleet-operator,
// and stops it when t ends. It needs KUBEBUILDER_ASSETS (make test sets it).
func StartHub(t testing.TB) *Hub {
	t.Helper()
	c, err := testcluster.StartWith(testcluster.Options{IssuerDiscovery: true})
	if err != nil {
		t.Fatalf("%v (here: KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) go test)", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the hub: %v", err)
		}
	})
	h := &Hub{Cluster: c, Namespace: "fleet-system", ServiceAccount: "fleet-operator"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if h.Issuer, err = c.ServiceAccountIssuer(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(c.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.Namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: h.ServiceAccount}}
	if _, err := cs.CoreV1().ServiceAccounts(h.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return h
}

// Subject is the sub of the ServiceAccount's tokens.
func (h *Hub) Subject() string {
	return "system:serviceaccount:" + h.Namespace + ":" + h.ServiceAccount
}

// Trust is what a cloud that trusts the hub's issuer for audience, and
// the ServiceAccount's subject, knows.
func (h *Hub) Trust(audience string) Trust {
	return Trust{Issuer: h.Issuer, CAData: h.Cluster.CAData, Audience: audience, Subject: h.Subject()}
}

// Config is a federation config that mints the ServiceAccount's tokens
// for audience on the hub, as its admin, for member, with provider.
func (h *Hub) Config(audience string, member federation.Member, provider federation.Provider) federation.Config {
	return federation.Config{
		Hub:       h.Cluster.Admin,
		Namespace: h.Namespace, ServiceAccount: h.ServiceAccount,
		Audiences: []string{audience},
		Member:    member,
		Provider:  provider,
	}
}
