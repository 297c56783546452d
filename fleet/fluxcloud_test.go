package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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

// Logins of one cloud ConfigMap that run at once, each reading the
// ServiceAccount with other annotations (an audience and an identity of
// their own), each exchange with the provider of what they read, for
// the audience they read: neither the provider carried in the context
// nor the handler kept by audiences crosses from one login to another.
func TestFluxCloudConcurrentLoginsKeepTheirOwnIdentity(t *testing.T) {
	hub := newMintLog(t, time.Hour)
	var reads atomic.Int64
	client := fake.NewClientset()
	client.PrependReactor("get", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
		sa := &corev1.ServiceAccount{}
		sa.Namespace, sa.Name = "team-a", "deployer"
		sa.Annotations = map[string]string{"identity": fmt.Sprint("id-", reads.Add(1)%3)}
		return true, sa, nil
	})
	provider := FluxProvider{
		Audiences: func(sa *corev1.ServiceAccount) ([]string, error) {
			return []string{"aud-" + sa.Annotations["identity"]}, nil
		},
		New: func(_ context.Context, c FluxCluster) (federation.Provider, error) {
			identity := c.ServiceAccount.Annotations["identity"]
			return federation.ProviderFunc(func(_ context.Context, token federation.Token, member federation.Member) (*login.ConnectionInfo, error) {
				return &login.ConnectionInfo{Server: member.Server, Token: identity + " for " + strings.Join(token.Audiences, ",")}, nil
			}), nil
		},
	}
	m := fluxMember{configMap: "team-a/prod", provider: "test", address: "https://m.example", namespace: "team-a", serviceAccount: "deployer"}
	fc := &fluxCloud{member: m, opts: FluxOptions{Config: hub.configFor("operator")}, provider: provider, client: client}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				info, err := fc.login(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				identity, audience, _ := strings.Cut(info.Token, " for ")
				if audience != "aud-"+identity {
					t.Errorf("a login exchanged as %s a token for %s", identity, audience)
				}
			}
		})
	}
	wg.Wait()
}

// The federation handler of a cloud ConfigMap, which remembers the hub
// key the cloud last took, is kept while the identity stays, and made
// anew when the audiences, the ServiceAccount's annotations (the cloud
// identity a provider reads) or the ServiceAccount itself (deleted and
// made again: a new UID) change: a refusal by another identity says
// nothing of the hub's key.
func TestFluxCloudKeepsItsHandlerPerIdentity(t *testing.T) {
	c := &fluxCloud{member: fluxMember{configMap: "team-a/prod", provider: "aws", address: "https://m.example", namespace: "team-a", serviceAccount: "deployer"}, opts: FluxOptions{Config: reviewHub}}
	sa := func(uid string, annotations map[string]string) *corev1.ServiceAccount {
		s := &corev1.ServiceAccount{}
		s.UID, s.Annotations = types.UID(uid), annotations
		return s
	}
	role := map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/a"}
	c.federated([]string{"sts.amazonaws.com"}, sa("1", role))
	first := c.kept
	for _, same := range []*corev1.ServiceAccount{sa("1", role), sa("1", map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/a"})} {
		if c.federated([]string{"sts.amazonaws.com"}, same); c.kept != first {
			t.Errorf("the handler was made anew for the same identity")
		}
	}
	for name, other := range map[string]func(){
		"another audience": func() { c.federated([]string{"custom"}, sa("1", role)) },
		"another annotation": func() {
			c.federated([]string{"sts.amazonaws.com"}, sa("1", map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/b"}))
		},
		"an annotation more": func() {
			c.federated([]string{"sts.amazonaws.com"}, sa("1", map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/a", "aws.auth.fluxcd.io/assume-role": "roleARN: x"}))
		},
		"a new ServiceAccount": func() { c.federated([]string{"sts.amazonaws.com"}, sa("2", role)) },
	} {
		c.federated([]string{"sts.amazonaws.com"}, sa("1", role))
		other()
		if c.kept == first {
			t.Errorf("%s: the handler of the first identity was kept", name)
		}
	}
}
