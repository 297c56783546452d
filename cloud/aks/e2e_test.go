package aks_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/rotation"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/vault"
)

// End to end, on the embedded API server (KUBEBUILDER_ASSETS must name the
// envtest binaries: make test sets it), whose webhook accepts a token only
// if the Entra ID stand-in issued it and it is neither expired nor revoked:
// a vault logs in through a kubeconfig file whose user runs `kubelogin
// get-token --login workloadidentity`, served natively (no kubelogin on
// PATH), and serves 4 callers creating, updating, listing and deleting ConfigMaps (rotation.Run) for 10 s while each token
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
	// The API server's side of AKS, as its Entra ID authentication does
	// it: a token is good when Entra ID issued it and it is neither
	// expired nor revoked (here: the stand-in says so).
	auth := testcluster.NewLedger(func(tok string) (string, error) {
		if why := e.check(tok); why != "" {
			return "", errors.New(why)
		}
		return "aad:" + client, nil
	})
	c.Issuer.SetAccept(auth.Accept)

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
	cfg.QPS, cfg.Burst = -1, 0 // load: no client-side limit, as the rotation scenario runs it
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	stats := rotation.Run(ctx, cs, "default", workers, loadFor, nil)

	accepted, rejected, why := auth.Counts()
	t.Logf("%d requests by %d callers in %v; %d tokens issued; tokens accepted at the webhook: %d, rejected: %d (%s)",
		stats.Requests, workers, loadFor, e.issued.Load(), accepted, rejected, strings.Join(why, "; "))
	if stats.FirstError != nil {
		t.Errorf("%d of %d requests failed (%d 401s), want none; the first: %v", stats.Unauthorized+stats.OtherErrors, stats.Requests, stats.Unauthorized, stats.FirstError)
	}
	if stats.Requests < workers*10 {
		t.Errorf("%d requests in %v, want at least %d: the load did not run", stats.Requests, loadFor, workers*10)
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
	for _, s := range append(auth.Tokens(), assertion) {
		if strings.Contains(out, s) {
			t.Errorf("the vault's log shows a token or the federated assertion")
			break
		}
	}
	if t.Failed() {
		t.Logf("the vault's log:\n%s", out)
	}
}
