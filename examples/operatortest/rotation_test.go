package operatortest_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/vault"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The operator's client goes on through a revocation of the token it
// uses: the vault takes the 401, logs in again and replays the request,
// and no caller sees an error. KUBEBUILDER_ASSETS names the API server's
// binaries (docs/testing.md says how to get them).
func TestNoErrorThroughARevocation(t *testing.T) {
	cluster, err := testcluster.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	}()

	// The login handler asks the test cluster for a new token at each
	// login, as yours asks your identity provider.
	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		info := cluster.Token(cluster.Issuer.Issue(time.Hour))
		return &info, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	list := func() {
		if _, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("a caller saw an error: %v", err)
		}
	}
	list()

	// Revoke the token in use. The API server keeps its last review of a
	// token for 10 s, then refuses it: the requests go on until it has.
	cred, err := v.Select(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cluster.Issuer.Revoke(cred.Info.Token)
	for cluster.Issuer.Rejected() == 0 {
		list()
		time.Sleep(100 * time.Millisecond)
	}
	list()
	if now, err := v.Select(ctx); err != nil || now.Info.Token == cred.Info.Token {
		t.Errorf("the vault still serves the revoked token (%v)", err)
	}
}
