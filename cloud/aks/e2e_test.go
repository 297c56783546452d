package aks_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/internal/testkit/testcluster"
	"github.com/authvault/authvault/internal/testkit/testlog"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/vault"
)

// End to end, on the embedded API server (KUBEBUILDER_ASSETS must name the
// envtest binaries: make test sets it), whose webhook accepts a token only
// if the Entra ID stand-in issued it and it is neither expired nor revoked:
// a vault logs in through a kubeconfig file whose user runs `kubelogin
// get-token --login workloadidentity`, served natively (no kubelogin on
// PATH), and serves 4 callers listing ConfigMaps for 10 s while each token
// lives 3 s, and the stand-in revokes one token the moment it issues it.
// No caller sees an error: the revoked token meets its 401 at the webhook,
// and the vault replays the request with a new one.
func TestEndToEndNativeRotationAndRevocation(t *testing.T) {
	const (
		tokenLifetime = 3 // seconds
		loadFor       = 10 * time.Second
		workers       = 4
		revoked       = 3 // the token revoked as it is issued
	)
	c, err := testcluster.Start()
	if err != nil {
		t.Fatalf("%v (here: KUBEBUILDER_ASSETS=$(bash ../../hack/envtest.sh) go test ./...)", err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	}()

	e := newEntra(t)
	e.expiresIn.Store(tokenLifetime)
	e.revokeNth.Store(revoked)
	auth := &aadAuthenticator{entra: e, accepted: map[string]bool{}}
	c.Issuer.SetAccept(auth.accept)

	useNative(t, e)
	tokenFile := writeFile(t, "azure-identity-token", []byte(assertion))
	cleanEnv(t, map[string]string{"AZURE_CLIENT_ID": client, "AZURE_TENANT_ID": tenant, "AZURE_FEDERATED_TOKEN_FILE": tokenFile})
	t.Setenv("PATH", t.TempDir())
	kubeconfig := string(kubeconfigYAML(c.Server, "--login", "workloadidentity", "--server-id", aks.DefaultServerID,
		"--authority-host", e.srv.URL+"/"))
	kubeconfig = strings.Replace(kubeconfig, b64(testCA()), b64(c.CAData), 1)
	path := writeFile(t, "kubeconfig", []byte(kubeconfig))

	var logs testlog.Buffer
	v := vault.New(vault.Options{NoFallback: true, Logger: logs.Logger(1)})
	defer v.Close()
	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path}), login.ID("aks"), login.Timeout(5*time.Second))

	ctx, cancel := context.WithTimeout(context.Background(), loadFor+10*time.Second)
	defer cancel()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// client-go's own limit (5 requests a second) would leave the callers
	// idle; this one is load, and leaves the shared machine some room.
	cfg.QPS, cfg.Burst = 50, 50
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	var (
		requests atomic.Int64
		mu       sync.Mutex // guards failures
		failures []error
		wg       sync.WaitGroup
	)
	end := time.Now().Add(loadFor)
	for range workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				_, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{Limit: 1})
				requests.Add(1)
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
				time.Sleep(20 * time.Millisecond) // a caller's pace, not an assertion
			}
		})
	}
	wg.Wait()

	accepted, rejected, why := auth.counts()
	t.Logf("%d requests by %d callers in %v; %d tokens issued; tokens accepted at the webhook: %d, rejected: %d (%s)",
		requests.Load(), workers, loadFor, e.issued.Load(), accepted, rejected, strings.Join(why, "; "))
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed, want none; the first: %v", len(failures), requests.Load(), failures[0])
	}
	if requests.Load() < workers*10 {
		t.Errorf("%d requests in %v, want at least %d: the load did not run", requests.Load(), loadFor, workers*10)
	}
	if accepted < 3 {
		t.Errorf("%d tokens accepted, want at least 3: the tokens did not rotate as they expired", accepted)
	}
	if e.issued.Load() < revoked || !slices.Contains(why, "revoked") {
		t.Errorf("%d tokens issued, rejections %q: want the revoked token sent and rejected", e.issued.Load(), why)
	}
	if asked := e.asked(); len(asked) == 0 || asked[0].grant != "assertion" || asked[0].client != client {
		t.Errorf("the stand-in was asked %+v, want workload identity's assertion for %s", asked, client)
	}

	out := logs.String()
	for _, s := range append(auth.tokens(), assertion) {
		if strings.Contains(out, s) {
			t.Errorf("the vault's log shows a token or the federated assertion")
			break
		}
	}
	if t.Failed() {
		t.Logf("the vault's log:\n%s", out)
	}
}

// aadAuthenticator is the API server's side of AKS, as its Entra ID
// authentication does it: a token is good when Entra ID issued it and it
// is neither expired nor revoked (here: the stand-in says so).
type aadAuthenticator struct {
	entra *entra

	mu       sync.Mutex      // guards the fields below
	accepted map[string]bool // tokens
	rejected []string        // tokens, in order
	why      []string        // why each was rejected, no secret
}

// accept is the testcluster.AcceptFunc.
func (a *aadAuthenticator) accept(tok string) (string, bool) {
	why := a.entra.check(tok)
	a.mu.Lock()
	defer a.mu.Unlock()
	if why != "" {
		a.rejected = append(a.rejected, tok)
		a.why = append(a.why, why)
		return "", false
	}
	a.accepted[tok] = true
	return "aad:" + client, true
}

// counts is how many different tokens were accepted and rejected, and why
// those were.
func (a *aadAuthenticator) counts() (accepted, rejected int, why []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.accepted), len(a.rejected), slices.Clone(a.why)
}

// tokens are every token the authenticator was asked about.
func (a *aadAuthenticator) tokens() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	toks := slices.Clone(a.rejected)
	for tok := range a.accepted {
		toks = append(toks, tok)
	}
	return toks
}
