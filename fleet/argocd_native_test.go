package fleet

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// fakeEKS is a native login for argocd-k8s-auth that records what it is
// asked: what an Argo CD cluster Secret's awsAuthConfig reaches.
type fakeEKS struct {
	mu       sync.Mutex
	requests []handlers.NativeRequest
}

func (f *fakeEKS) use(t *testing.T) {
	handlers.UseNative(handlers.Native{
		Name:   "fake-eks",
		Serves: func(exec clientcmdapi.ExecConfig) bool { return exec.Command == "argocd-k8s-auth" },
		Handler: func(req handlers.NativeRequest) (login.Handler, error) {
			f.mu.Lock()
			f.requests = append(f.requests, req)
			f.mu.Unlock()
			return func(context.Context) (*login.ConnectionInfo, error) {
				return &login.ConnectionInfo{Server: "https://endpoint.example", Token: "t", Expiration: time.Now().Add(time.Hour)}, nil
			}, nil
		},
	})
	t.Cleanup(func() { handlers.UseNative(handlers.Native{Name: "fake-eks"}) }) // serves nothing
}

// An Argo CD Secret's awsAuthConfig reaches a native login only when the
// policy names it, and then as a kubeconfig from elsewhere (Untrusted), its
// role among the arguments; under AllowAll it is trusted, as a file is.
// Its proxyUrl is refused then: a proxy it chose could take the token
// elsewhere.
func TestArgoCDAWSAuthConfigIsUntrusted(t *testing.T) {
	ctx := ctxFor(t)
	f := &fakeEKS{}
	f.use(t)
	h := newHub(t, SecretsOptions{Format: ArgoCD})
	aws := map[string]any{"clusterName": "prod", "roleARN": "arn:aws:iam::1:role/chosen-by-the-secret"}
	h.put("argocd", "c", argoLabels(), argoSecret("c", "https://endpoint.example", map[string]any{"awsAuthConfig": aws}))
	h.put("argocd", "p", argoLabels(), argoSecret("p", "https://endpoint.example", map[string]any{"awsAuthConfig": aws, "proxyUrl": "http://proxy.example:3128"}))

	if _, err := argoCDSecret(h.client.CoreV1(), "argocd", "c", handlers.DenyAll)(ctx); err == nil || !strings.Contains(err.Error(), "handlers.AllowNative") {
		t.Errorf("under DenyAll: %v, want a refusal naming AllowNative", err)
	}
	allowed := handlers.AllowNative(handlers.DenyAll, "fake-eks")
	if _, err := argoCDSecret(h.client.CoreV1(), "argocd", "p", allowed)(ctx); err == nil || !strings.Contains(err.Error(), "may not set proxy-url") {
		t.Errorf("with a proxyUrl: %v, want a refusal", err)
	}
	if len(f.requests) != 0 {
		t.Fatalf("the native login was asked %d times before its policy allowed it", len(f.requests))
	}
	for _, policy := range []handlers.PluginPolicy{allowed, handlers.AllowAll} {
		if _, err := argoCDSecret(h.client.CoreV1(), "argocd", "c", policy)(ctx); err != nil {
			t.Fatalf("policy %s: %v", policy.PolicyType, err)
		}
	}
	if len(f.requests) != 2 {
		t.Fatalf("%d requests, want 2", len(f.requests))
	}
	untrusted, trusted := f.requests[0], f.requests[1]
	if !untrusted.Untrusted || trusted.Untrusted {
		t.Errorf("Untrusted: %v under AllowNative(DenyAll), %v under AllowAll; want true, false", untrusted.Untrusted, trusted.Untrusted)
	}
	if !slices.Contains(untrusted.Exec.Args, "arn:aws:iam::1:role/chosen-by-the-secret") {
		t.Errorf("args %q: the Secret's role is not among them", untrusted.Exec.Args)
	}
}
