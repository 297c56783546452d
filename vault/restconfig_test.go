package vault

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/login"
)

// A clientset and a controller-runtime client built from RESTConfig send
// every request through the vault, and keep the user's own settings.
func TestRESTConfigServesClientGoAndControllerRuntime(t *testing.T) {
	v, srv, iss := issuingVault(t, Options{}, "/k8s/clusters/c-1")
	cfg, err := v.RESTConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tls := cfg.TLSClientConfig; cfg.Host != srv.URL() || len(tls.CAData)+len(tls.CertData)+len(tls.KeyData) > 0 || tls.Insecure || cfg.BearerToken != "" || cfg.Username != "" {
		t.Fatalf("RESTConfig() = %+v, want the server as Host and no TLS or auth of its own", cfg)
	}
	cfg.UserAgent = "my-operator/1.0"
	cfg.Impersonate.UserName = "bob"
	if _, err := rest.HTTPClientFor(cfg); err != nil {
		t.Fatalf("rest.HTTPClientFor() error: %v", err)
	}

	cs, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	srv.revoke(iss.latest()) // the first request meets a 401 and is retried
	list, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("clientset List() error: %v", err)
	}
	if len(list.Items) != 1 || !strings.HasPrefix(list.Items[0].Name, "seen-by-token-tok-2") {
		t.Errorf("clientset List() = %+v, want the list as the second token saw it", list.Items)
	}

	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme, Mapper: mapper})
	if err != nil {
		t.Fatalf("client.New() error: %v", err)
	}
	var cms corev1.ConfigMapList
	if err := c.List(context.Background(), &cms, client.InNamespace("default")); err != nil {
		t.Fatalf("controller-runtime List() error: %v", err)
	}

	for _, r := range srv.seen() {
		if r.Path != "/api/v1/namespaces/default/configmaps" {
			t.Errorf("server saw path %s, want it below its prefix", r.Path)
		}
		if !strings.HasPrefix(r.UserAgent, "my-operator/1.0") || r.Impersonate != "bob" {
			t.Errorf("server saw user agent %q and impersonation %q, want the config's", r.UserAgent, r.Impersonate)
		}
	}
	if len(srv.seen()) != 3 {
		t.Errorf("server saw %d requests, want 3 (a 401, the retry, controller-runtime's)", len(srv.seen()))
	}
}

func TestNamespace(t *testing.T) {
	v, _ := testVault(t, Options{})
	if got := v.Namespace(); got != "default" {
		t.Errorf("Namespace() of an empty vault = %q, want default", got)
	}
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: "https://a", Token: "t", DefaultNamespace: "team-a", Priority: 1}))
	v.OnLogin(handlerOf(login.ConnectionInfo{Server: "https://b", Token: "u", DefaultNamespace: "team-b"}))
	mustSelect(t, v)
	eventually(t, "both", func() bool { return v.snap.Load().size() == 2 })
	if got := v.Namespace(); got != "team-a" {
		t.Errorf("Namespace() = %q, want the highest priority's team-a", got)
	}
}
