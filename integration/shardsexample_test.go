package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/manifests"
	"github.com/authvault/authvault/testkit/testwait"
)

// examples/sharded-fleet, against the real API server: its objects are
// accepted, and with its RBAC alone (the ServiceAccount impersonated)
// replicas watch the kubeconfig Secrets, share the clusters on Leases, and
// release their Leases when they stop.
var _ = Describe("The sharded fleet example", func() {
	It("deploys three replicas whose RBAC is all a sharded fleet needs", func(ctx SpecContext) {
		docs, err := manifests.Read("../examples/sharded-fleet")
		Expect(err).NotTo(HaveOccurred())
		var dep appsv1.Deployment
		var sa corev1.ServiceAccount
		Expect(manifests.One(docs, "Deployment", &dep)).To(Succeed())
		Expect(manifests.One(docs, "ServiceAccount", &sa)).To(Succeed())
		Expect(dep.Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal(sa.Name))
		container := dep.Spec.Template.Spec.Containers[0]
		Expect(container.Args).To(ContainElements("--shard-group=fleet", "--shard-namespace="+sa.Namespace))
		Expect(slices.ContainsFunc(container.Env, func(e corev1.EnvVar) bool {
			return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
		})).To(BeTrue(), "each replica is its pod's name")

		// The objects, in a namespace of this spec's, the cluster-wide
		// ones under names of its own.
		ns := newNamespace("sharded-example")
		c, err := client.New(cluster.Admin, client.Options{})
		Expect(err).NotTo(HaveOccurred())
		for _, d := range docs {
			kind := d.Object.GetKind()
			if kind == "Kustomization" || kind == "Namespace" {
				continue
			}
			obj := retarget(d.Object, sa.Namespace, ns)
			if kind == "ClusterRole" || kind == "ClusterRoleBinding" {
				obj.SetName(obj.GetName() + "-" + ns)
				if kind == "ClusterRoleBinding" {
					obj.Object["roleRef"].(map[string]any)["name"] = obj.Object["roleRef"].(map[string]any)["name"].(string) + "-" + ns
				}
			}
			Expect(apply(ctx, c, obj)).To(Succeed(), "%s %s", kind, obj.GetName())
		}

		secrets := newNamespace("sharded-example-clusters")
		for i := range 6 {
			putKubeconfigSecret(ctx, secrets, fmt.Sprintf("c%d", i), cluster, cluster.Issuer.Issue(0))
		}
		asSA := rest.CopyConfig(cluster.Admin)
		asSA.Impersonate = rest.ImpersonationConfig{UserName: fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa.Name)}
		hub, err := kubernetes.NewForConfig(asSA)
		Expect(err).NotTo(HaveOccurred())

		var mu sync.Mutex
		owners := map[string]string{}
		var stops []func()
		for _, id := range []string{"fleet-a", "fleet-b"} {
			f := fleet.New(fleet.Options{
				Shards: &fleet.Shards{Config: asSA, Namespace: ns, Group: "fleet", Identity: id,
					LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond},
				OnAdd: func(ctx context.Context, m *fleet.Member) {
					mu.Lock()
					owners[m.Name()] = id
					mu.Unlock()
				},
			})
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- f.WatchSecrets(wctx, fleet.SecretsOptions{Client: hub, Namespace: secrets}) }()
			stops = append(stops, func() { cancel(); Expect(<-done).To(Succeed()); f.Close() })
		}
		Eventually(func() int { mu.Lock(); defer mu.Unlock(); return len(owners) }).WithTimeout(testwait.Hang).Should(Equal(6))
		leases, err := admin.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(leases.Items).To(HaveLen(2), "one Lease per replica")
		for _, l := range leases.Items {
			Expect(l.Finalizers).To(ContainElement("fleet.authvault.dev/shard"), "%s: a delete only marks it", l.Name)
		}
		for _, stop := range stops {
			stop()
		}
		leases, err = admin.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(leases.Items).To(BeEmpty(), "each replica released its Lease, took the finalizer off and deleted it when it stopped, with the RBAC the example grants")
	}, NodeTimeout(2*time.Minute))
})
