package eks_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/hubtrust"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// The roles of the account the stand-in plays, whose trust policies allow
// the hub's ServiceAccount.
const (
	fedRole        = "arn:aws:iam::111122223333:role/fleet"
	fedStagingRole = "arn:aws:iam::111122223333:role/fleet-staging"
)

// fedEnv is one federation case on the shared hub: an STS stand-in that
// trusts the hub's issuer for eks.FederatedAudience, the hub's API server standing
// in for the members (its webhook takes an EKS token once the stand-in
// answers its presigned GetCallerIdentity for one of the clusters), and
// what the case's vaults logged and its logins returned, which must hold
// no secret.
type fedEnv struct {
	hub    *hubtrust.Hub
	sts    *stsStub
	trust  *oidcTrust
	ledger *testcluster.Ledger
	logs   testlog.Buffer

	mu   sync.Mutex // guards errs
	errs []error
}

// newFedEnv starts a stand-in and points the hub's webhook at it for the
// members named clusters (default: testCluster); when t ends, it checks
// that no error or log line of the case holds a secret.
func newFedEnv(t *testing.T, hub *hubtrust.Hub, clusters ...string) *fedEnv {
	if len(clusters) == 0 {
		clusters = []string{testCluster}
	}
	s := newSTSStub(t)
	provider := hub.Trust(eks.FederatedAudience)
	provider.Subject = "" // the roles' trust policies say which
	s.web = &oidcTrust{provider: provider, roles: map[string]string{fedRole: hub.Subject(), fedStagingRole: hub.Subject()}}
	e := &fedEnv{hub: hub, sts: s, trust: s.web}
	e.ledger = testcluster.NewLedger(func(tok string) (string, error) {
		var err error
		for _, c := range clusters {
			user, cerr := (&iamAuthenticator{sts: s, cluster: c}).verify(tok)
			if cerr == nil {
				return user, nil
			}
			err = cerr
		}
		return "", err
	})
	hub.Cluster.Issuer.SetAccept(e.ledger.Accept)
	t.Cleanup(func() {
		hub.Cluster.Issuer.SetAccept(nil)
		e.assertNoSecrets(t)
	})
	return e
}

// options exchange at the stand-in for role, with the SDK's retries
// 10 ms apart.
func (e *fedEnv) options(role string) eks.FederatedOptions {
	return eks.FederatedOptions{
		Cluster:     testCluster,
		RoleARN:     role,
		STSEndpoint: e.sts.srv.URL,
		AWS: &aws.Config{
			Region:     testRegion,
			HTTPClient: e.sts.srv.Client(),
			Retryer: func() aws.Retryer {
				return retry.NewStandard(func(o *retry.StandardOptions) {
					o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil })
				})
			},
		},
	}
}

// member is the hub's API server, standing in for an EKS member.
func (e *fedEnv) member() federation.Member {
	return federation.Member{Server: e.hub.Cluster.Server, CAData: e.hub.Cluster.CAData}
}

// config mints for eks.FederatedAudience and exchanges with opts.
func (e *fedEnv) config(opts eks.FederatedOptions) federation.Config {
	return e.hub.Config(eks.FederatedAudience, e.member(), eks.Federated(opts))
}

// vault is a vault that logs in with cfg, closed when t ends.
func (e *fedEnv) vault(t *testing.T, cfg federation.Config) *vault.Vault {
	v := vault.New(vault.Options{NoFallback: true, Logger: e.logs.Logger(1)})
	t.Cleanup(v.Close)
	v.OnLogin(federation.Login(cfg), login.Timeout(testwait.Hang))
	return v
}

// refusal is the LoginError of a vault whose only login is refused: it
// comes at once, the login being permanent.
func (e *fedEnv) refusal(t *testing.T, cfg federation.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	_, err := e.vault(t, cfg).Select(ctx)
	if err == nil {
		t.Fatal("the vault has a credential, want a refusal")
	}
	if ctx.Err() != nil {
		t.Fatalf("the refusal came only at the caller's deadline: the login was retried (%v)", err)
	}
	e.keep(err)
	return err
}

// keep adds err to the errors checked for secrets.
func (e *fedEnv) keep(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

// whoAmI lists namespaces with v and returns whom the member's API server
// sees (SelfSubjectReview).
func whoAmI(t *testing.T, v *vault.Vault) string {
	t.Helper()
	cfg, err := v.RESTConfig(testwait.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return hubtrust.WhoAmI(t, cfg)
}

// session is the user an API server maps a role's session to.
func session(role string) string {
	return strings.Replace(strings.Replace(role, ":iam:", ":sts:", 1), ":role/", ":assumed-role/", 1) + "/" + eks.SessionName
}

// assertNoSecrets fails when an error kept or a log line shows a secret:
// a hub token, an issued session's keys, an EKS token or its signature.
func (e *fedEnv) assertNoSecrets(t *testing.T) {
	t.Helper()
	secrets := append(e.trust.presented(), e.sts.secrets()...)
	for _, tok := range e.ledger.Tokens() {
		secrets = append(secrets, tok)
		if strings.HasPrefix(tok, eks.TokenPrefix) {
			secrets = append(secrets, presignedURL(t, tok).Query().Get("X-Amz-Signature"))
		}
	}
	e.mu.Lock()
	errs := append([]error(nil), e.errs...)
	e.mu.Unlock()
	for _, err := range errs {
		assertNoSecret(t, "an error", err, secrets...)
	}
	logs := e.logs.String()
	for _, secret := range secrets {
		if secret != "" && strings.Contains(logs, secret) {
			t.Errorf("the log shows a secret (%.12s…)", secret)
		}
	}
}
