package hubtrust

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// FluxFleet is a fleet that watches the Flux ConfigMaps of the
// ServiceAccount's namespace on the hub with opts, whose Config,
// Namespace and Operator default to the hub's admin, that namespace and
// the ServiceAccount. The watch stops and the fleet closes when t ends.
func (h *Hub) FluxFleet(t testing.TB, log logr.Logger, opts fleet.FluxOptions) *fleet.Fleet {
	t.Helper()
	if opts.Config == nil {
		opts.Config = h.Cluster.Admin
	}
	if opts.Namespace == "" {
		opts.Namespace = h.Namespace
	}
	if opts.Operator == "" {
		opts.Operator = h.Namespace + "/" + h.ServiceAccount
	}
	f := fleet.New(fleet.Options{Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.WatchFlux(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchFlux: %v", err)
		}
		f.Close()
	})
	return f
}

// PutFluxConfigMap writes the Flux ConfigMap name in the ServiceAccount's
// namespace: it names the ServiceAccount, and the hub's own API server
// (its address and CA) as the member, with data's keys on top. It returns
// the member's name in a fleet, "<namespace>/<name>".
func (h *Hub) PutFluxConfigMap(t testing.TB, name string, data map[string]string) string {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: name},
		Data:       map[string]string{"address": h.Cluster.Server, "ca.crt": string(h.Cluster.CAData), "serviceAccountName": h.ServiceAccount},
	}
	for k, v := range data {
		cm.Data[k] = v
	}
	ctx := testwait.Context(t)
	cms := h.admin(t).CoreV1().ConfigMaps(h.Namespace)
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cms.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ConfigMap %s: %v", name, err)
		}
	})
	return h.Namespace + "/" + name
}

// Annotate sets the ServiceAccount's annotations, as a cloud's workload
// identity reads them, to annotations.
func (h *Hub) Annotate(t testing.TB, annotations map[string]string) {
	t.Helper()
	ctx := testwait.Context(t)
	sas := h.admin(t).CoreV1().ServiceAccounts(h.Namespace)
	sa, err := sas.Get(ctx, h.ServiceAccount, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa.Annotations = annotations
	if _, err := sas.Update(ctx, sa, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Vault waits for the member name in f and returns its vault.
func Vault(t testing.TB, f *fleet.Fleet, name string) *vault.Vault {
	t.Helper()
	var v *vault.Vault
	testwait.For(t, "member "+name+" in the fleet", func() bool {
		v = f.Vault(name)
		return v != nil
	})
	return v
}

func (h *Hub) admin(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(h.Cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
