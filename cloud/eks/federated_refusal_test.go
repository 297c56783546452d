package eks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/hubtrust"
	"github.com/authvault/authvault/testkit/testwait"
)

// What STS refuses is federation.ErrRejected, with STS's code, the cluster
// and the role in the error; nothing is issued, no token reaches the
// member, and the login is not retried at once.
func testFederatedRefusals(t *testing.T, hub *hubtrust.Hub) {
	for _, c := range []struct {
		name  string
		setup func(e *fedEnv, cfg *federation.Config, opts *eks.FederatedOptions)
		code  string
		says  string
	}{
		{"the wrong audience", func(e *fedEnv, cfg *federation.Config, _ *eks.FederatedOptions) {
			cfg.Audiences = []string{"sts.example.com"}
		}, "InvalidIdentityToken", "audience"},
		{"another ServiceAccount", func(e *fedEnv, cfg *federation.Config, _ *eks.FederatedOptions) {
			cfg.ServiceAccount = otherServiceAccount(t, e.hub)
		}, "AccessDenied", "sts:AssumeRoleWithWebIdentity"},
		{"a role that does not trust the hub", func(_ *fedEnv, _ *federation.Config, opts *eks.FederatedOptions) {
			opts.RoleARN = "arn:aws:iam::111122223333:role/unrelated"
		}, "AccessDenied", "sts:AssumeRoleWithWebIdentity"},
		{"an expired token", func(e *fedEnv, _ *federation.Config, _ *eks.FederatedOptions) {
			e.trust.clock = func() time.Time { return time.Now().Add(2 * time.Hour) }
		}, "ExpiredTokenException", "Token expired"},
		{"an issuer the account has no provider for", func(e *fedEnv, _ *federation.Config, _ *eks.FederatedOptions) {
			e.trust.provider.Issuer = "https://oidc.eks.eu-west-1.amazonaws.com/id/0123ABCD"
		}, "InvalidIdentityToken", "No OpenIDConnect provider found in your account for " + hub.Issuer},
		{"the identity provider's refusal", func(e *fedEnv, _ *federation.Config, _ *eks.FederatedOptions) {
			e.trust.refuse = "IDPRejectedClaim"
		}, "IDPRejectedClaim", "authentication failed for [redacted]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newFedEnv(t, hub)
			opts := e.options(fedRole)
			cfg := e.config(opts)
			c.setup(e, &cfg, &opts)
			cfg.Provider = eks.Federated(opts)
			err := e.refusal(t, cfg)
			if !errors.Is(err, federation.ErrRejected) {
				t.Errorf("%v: not federation.ErrRejected", err)
			}
			for _, want := range []string{`eks: cluster "prod": AWS STS refused the hub's token for role "` + opts.RoleARN + `"`, c.code + ": ", c.says} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			if got := e.sts.count("refused:" + c.code); got == 0 {
				t.Errorf("the stand-in refused nothing with %s", c.code)
			}
			if got := e.sts.count("AssumeRoleWithWebIdentity"); got != 0 {
				t.Errorf("%d sessions issued, want none", got)
			}
			if accepted, _, _ := e.ledger.Counts(); accepted != 0 {
				t.Errorf("the member accepted %d tokens, want none", accepted)
			}
		})
	}
}

// otherServiceAccount is a ServiceAccount of the hub's namespace that no
// role trusts.
func otherServiceAccount(t *testing.T, hub *hubtrust.Hub) string {
	t.Helper()
	const name = "someone-else"
	cs, err := kubernetes.NewForConfig(hub.Cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(hub.Namespace).Create(testwait.Context(t), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

// An STS that answers 5xx, or not at all, fails the login with an error
// that is neither ErrRejected nor permanent: the vault retries, and logs
// in once STS answers.
func testFederatedUnavailable(t *testing.T, hub *hubtrust.Hub) {
	t.Run("5xx", func(t *testing.T) {
		e := newFedEnv(t, hub)
		cfg := e.config(e.options(fedRole))
		e.trust.unavailable.Store(3) // the SDK's three attempts
		_, err := federation.Login(cfg)(testwait.Context(t))
		e.keep(err)
		assertRetried(t, err, "ServiceUnavailable")

		e.trust.unavailable.Store(4) // a first login of the vault fails
		v := e.vault(t, cfg)
		if got, want := whoAmI(t, v), session(fedRole); got != want {
			t.Errorf("the member sees %q, want %q", got, want)
		}
		if got := e.sts.count("refused:ServiceUnavailable"); got != 7 {
			t.Errorf("STS answered 503 %d times, want 7: the vault did not log in again", got)
		}
	})
	t.Run("down", func(t *testing.T) {
		e := newFedEnv(t, hub)
		down := newSTSStub(t)
		down.srv.Close()
		opts := e.options(fedRole)
		opts.STSEndpoint = down.srv.URL
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
		defer cancel()
		_, err := federation.Login(e.config(opts))(ctx)
		e.keep(err)
		assertRetried(t, err, "AssumeRoleWithWebIdentity")
	})
}

// assertRetried fails unless err is one the vault retries, naming the
// cluster, the role and says.
func assertRetried(t *testing.T, err error, says string) {
	t.Helper()
	if err == nil {
		t.Fatal("the login succeeded, want an error")
	}
	if errors.Is(err, federation.ErrRejected) {
		t.Errorf("%v: federation.ErrRejected, want an error the vault retries", err)
	}
	if _, ok := errors.AsType[*login.PermanentError](err); ok {
		t.Errorf("%v: permanent, want an error the vault retries", err)
	}
	for _, want := range []string{`eks: cluster "prod"`, `role "` + fedRole + `"`, says} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}
