package addonauth

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// An impersonated list beside a plain one through the same vault, over
// TLS to a server that answers at once: what ActAsCaller adds to a request
// (docs/benchmarks.md). client-per-caller is the alternative it replaces:
// a clientset made for the caller at each request, with client-go's own
// Impersonate config.
func BenchmarkActAsCaller(b *testing.B) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"settings"}}]}`))
	}))
	defer srv.Close()
	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: srv.URL, CAData: ca, Token: "service-token"}, nil
	}, login.ID("service"))
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS = -1 // no client-side rate limit: the request's own cost
	acting, err := ActAsCaller(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := withUser(context.Background(), User{Name: "alice", UID: "42", Groups: []string{"devs", "system:authenticated"},
		Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"X509SHA256=ab"}}})
	list := func(b *testing.B, cs kubernetes.Interface) {
		if _, err := cs.CoreV1().ConfigMaps("team-a").List(ctx, metav1.ListOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		cfg  *rest.Config
	}{{"plain", cfg}, {"acting", acting}} {
		b.Run(bc.name, func(b *testing.B) {
			cs, err := kubernetes.NewForConfig(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			list(b, cs)
			b.ReportAllocs()
			for b.Loop() {
				list(b, cs)
			}
		})
	}
	b.Run("client-per-caller", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u, _ := UserFrom(ctx)
			per := rest.CopyConfig(cfg)
			per.Impersonate = rest.ImpersonationConfig{UserName: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
			cs, err := kubernetes.NewForConfig(per)
			if err != nil {
				b.Fatal(err)
			}
			list(b, cs)
		}
	})
}
