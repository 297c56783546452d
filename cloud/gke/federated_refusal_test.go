package gke_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/redact"
)

// otherProvider is a pool provider that does not trust the hub.
const otherProvider = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/fleet/providers/other"

// refused is the error a vault's first login gets for cfg, failing t when
// it logs in; its log is checked for secrets.
func (e *fed) refused(t *testing.T, cfg federation.Config) error {
	t.Helper()
	v, logs := e.vault(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cred, err := v.Select(ctx)
	if err == nil {
		t.Fatalf("logged in with %q's token, want a refusal", cred.Handler)
	}
	e.noSecret(t, printed(err), logs.String())
	return err
}

// What the STS refuses, each in its wire format (400, an OAuth2 error and
// its description), is federation.ErrRejected, and the error names the
// member, the provider and what the STS said, with no token.
func refusals(t *testing.T, e *fed) {
	hub, err := kubernetes.NewForConfig(e.hub.Cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	intruder := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}
	if _, err := hub.CoreV1().ServiceAccounts(e.hub.Namespace).Create(context.Background(), intruder, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		setup func(*pool, *federation.Config)
		want  []string // in the error, besides the provider and the member
	}{
		{"wrong audience", func(_ *pool, cfg *federation.Config) {
			cfg.Audiences = []string{gke.AllowedAudience(otherProvider)}
		}, []string{"invalid_grant", `audience \"https://iam.googleapis.com/`}},
		{"another ServiceAccount", func(_ *pool, cfg *federation.Config) {
			cfg.ServiceAccount = "intruder"
		}, []string{"unauthorized_client", "attribute condition"}},
		{"expired (the STS's clock ahead)", func(p *pool, _ *federation.Config) {
			p.trust.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		}, []string{"invalid_grant", "expired at"}},
		{"untrusted issuer", func(p *pool, _ *federation.Config) {
			p.trust.Issuer = "https://issuer.example"
		}, []string{"invalid_grant", "issuer"}},
		{"no such provider", func(_ *pool, cfg *federation.Config) {
			opts := e.opts()
			opts.Audience = otherProvider
			cfg.Provider = gke.Federated(opts)
		}, []string{"invalid_target"}},
		{"a refusal that quotes the token", func(p *pool, _ *federation.Config) {
			p.quote = true
		}, []string{"invalid_grant", "ID Token [" + redact.Marker + "]"}},
		{"a refusal that echoes the request, cut short", func(*pool, *federation.Config) {
			e.g.echo.Store(true)
		}, []string{"invalid_grant", "you sent audience=", "…"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := e.pool()
			cfg := e.config(e.opts())
			c.setup(p, &cfg)
			e.g.pool.Store(p)
			defer e.g.echo.Store(false)
			before := len(e.g.seen())
			err := e.refused(t, cfg)
			if !errors.Is(err, federation.ErrRejected) {
				t.Errorf("%v, want federation.ErrRejected", err)
			}
			for _, want := range append(c.want, "gke: no access token for "+e.hub.Cluster.Server, "pool provider ") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q:\n%v", want, err)
				}
			}
			if len(e.g.seen()) == before {
				t.Errorf("no hub token reached the STS")
			}
		})
	}
}

// A principal the STS took but IAM does not let impersonate the service
// account (403 PERMISSION_DENIED) is no rejection of the hub's token: the
// error names the service account and the role it needs, and is
// permanent. An answer that quotes the federated token shows no token.
func refusedImpersonation(t *testing.T, e *fed) {
	for _, c := range []struct {
		name    string
		account string
		echo    bool
		said    string // what Google said, as the error quotes it
	}{
		{"not granted", "elsewhere@authvault-test.iam.gserviceaccount.com", false, "getAccessToken' denied"},
		{"a refusal that quotes the federated token", fleetSA, true, "for the caller " + redact.Marker},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.g.echoIAM.Store(c.echo)
			defer e.g.echoIAM.Store(false)
			opts := e.opts()
			opts.ServiceAccount = c.account
			iam := e.g.iamCalls.Load()
			err := e.refused(t, e.config(opts))
			var permanent *login.PermanentError
			if errors.Is(err, federation.ErrRejected) || !errors.As(err, &permanent) {
				t.Errorf("%v: want a permanent error, not ErrRejected", err)
			}
			// federation.Login hides the part of an email before its @,
			// as it hides a URL's user info: the gke.Error has it whole.
			_, domain, _ := strings.Cut(c.account, "@")
			for _, want := range []string{"HTTP 403 PERMISSION_DENIED", c.said, "roles/iam.workloadIdentityUser on service account", domain} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q:\n%v", want, err)
				}
			}
			var gkeErr *gke.Error
			if !errors.As(err, &gkeErr) || !strings.Contains(gkeErr.Credentials, `service account "`+c.account+`"`) {
				t.Errorf("%#v: want a gke.Error naming service account %q", gkeErr, c.account)
			}
			if e.g.iamCalls.Load() == iam {
				t.Errorf("no impersonation asked")
			}
		})
	}
}

// An STS that answers 503, or none at all, fails the login with an error
// worth retrying (neither ErrRejected nor permanent), and the vault's
// retry logs in once it answers.
func stsDown(t *testing.T, e *fed) {
	gone := httptest.NewServer(nil)
	gone.Close()
	for _, c := range []struct {
		name string
		opts func() gke.FederatedOptions
		want string
	}{
		{"503", func() gke.FederatedOptions { e.g.down.Store(1); return e.opts() }, "HTTP 503 UNAVAILABLE"},
		{"no answer", func() gke.FederatedOptions {
			o := e.opts()
			o.TokenURL = gone.URL + "/sts"
			return o
		}, "connection refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := federation.Login(e.config(c.opts()))(context.Background())
			var permanent *login.PermanentError
			if err == nil || errors.Is(err, federation.ErrRejected) || errors.As(err, &permanent) {
				t.Fatalf("%v: want an error worth retrying", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "gke: ") {
				t.Errorf("the error does not say %q:\n%v", c.want, err)
			}
			e.noSecret(t, printed(err))
		})
	}
	t.Run("retried", func(t *testing.T) {
		e.g.down.Store(2)
		defer e.g.down.Store(0)
		sts := e.g.stsCalls.Load()
		v, logs := e.vault(t, e.config(e.opts()), login.Backoff(50*time.Millisecond, 200*time.Millisecond))
		selected(t, v)
		if e.g.down.Load() != 0 || e.g.stsCalls.Load()-sts != 1 {
			t.Errorf("%d 503s left to answer, %d exchanges: want the vault to retry through both", e.g.down.Load(), e.g.stsCalls.Load()-sts)
		}
		e.noSecret(t, logs.String())
	})
}
