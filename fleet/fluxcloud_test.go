package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
)

// A cloud ConfigMap's ServiceAccount that is gone (deleted while its
// member served) or that the operator may not read (no get on
// serviceaccounts) fails the login at once, as TokenRequest's would: a
// retry within the login reads the same, and the waiting callers get
// the reason now. The error names the ConfigMap, the ServiceAccount and,
// when forbidden, the permission that is missing.
func TestFluxCloudServiceAccountReadFailsAtOnce(t *testing.T) {
	m := fluxMember{configMap: "team-a/prod", provider: "aws", address: "https://m.example", namespace: "team-a", serviceAccount: "deployer"}
	provider := FluxProvider{
		Audiences: func(*corev1.ServiceAccount) ([]string, error) { return []string{"sts.amazonaws.com"}, nil },
		New: func(context.Context, FluxCluster) (federation.Provider, error) {
			return nil, errors.New("New must not be called without a ServiceAccount")
		},
	}
	forbidden := fake.NewClientset()
	forbidden.PrependReactor("get", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("serviceaccounts"), "deployer", errors.New("RBAC: no rule"))
	})
	for _, c := range []struct {
		name   string
		client *fake.Clientset
		want   []string
	}{
		{"gone", fake.NewClientset(), []string{"team-a/prod", "team-a/deployer", "does not exist"}},
		{"forbidden", forbidden, []string{"team-a/prod", "team-a/deployer", "get on serviceaccounts in namespace team-a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc := &fluxCloud{member: m, opts: FluxOptions{Config: reviewHub}, provider: provider, client: c.client}
			_, err := fc.login(context.Background())
			var permanent *login.PermanentError
			if !errors.As(err, &permanent) {
				t.Errorf("got %v, want a permanent error", err)
			}
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want an error that says %q", err, w)
				}
			}
		})
	}
}

// The ServiceAccount's read and the provider's New are bounded, as the
// federation login's mint and exchange are, whatever timeout the handler
// was registered with (FluxOptions.Login may set none): a hub or a
// provider that never answers does not hold the login.
func TestFluxCloudBoundsWhatPrecedesTheMint(t *testing.T) {
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = "team-a", "deployer"
	m := fluxMember{configMap: "team-a/prod", provider: "aws", address: "https://m.example", namespace: "team-a", serviceAccount: "deployer"}
	provider := FluxProvider{
		Audiences: func(*corev1.ServiceAccount) ([]string, error) { return []string{"sts.amazonaws.com"}, nil },
		New: func(ctx context.Context, _ FluxCluster) (federation.Provider, error) {
			if _, ok := ctx.Deadline(); !ok {
				return nil, errors.New("New's context has no deadline")
			}
			return nil, errors.New("bounded")
		},
	}
	fc := &fluxCloud{member: m, opts: FluxOptions{Config: reviewHub}, provider: provider, client: fake.NewClientset(sa)}
	if _, err := fc.login(context.Background()); err == nil || !strings.Contains(err.Error(), "bounded") {
		t.Errorf("got %v, want New called with a deadline", err)
	}
}
