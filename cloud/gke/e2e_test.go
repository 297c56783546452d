package gke_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/rotation"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// End to end, on the embedded API server (KUBEBUILDER_ASSETS must name the
// envtest binaries: make test sets it), whose webhook accepts a Google
// access token only once the stand-in's tokeninfo has vouched for it, as
// GKE asks Google: a vault logging in through a kubeconfig FILE whose user
// runs `gke-gcloud-auth-plugin --use_application_default_credentials`
// (a command not on this machine: Native serves it, with Application
// Default Credentials from a service-account key whose token_uri is the
// stand-in) serves 4 callers creating, updating, listing and deleting ConfigMaps (rotation.Run) for 10 s while each token
// lives 3 s, and the stand-in revokes one token the moment it issues it.
// No caller sees an error: the revoked token meets its 401 at the webhook
// and the vault replays the request with a new one.
func TestEndToEndRotationAndRevocation(t *testing.T) {
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

	g := newStandIn(t)
	g.expiresIn.Store(tokenLifetime)
	g.revokeAt.Store(revoked)
	auth := testcluster.NewLedger(tokenInfo(g.srv.URL + "/tokeninfo"))
	c.Issuer.SetAccept(auth.Accept)

	key := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(key, g.keyJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", key)
	useNative(t)
	kubeconfig := writeGKEKubeconfig(t, c.Server, c.CAData)

	var logs testlog.Buffer
	v := vault.New(vault.Options{NoFallback: true, Logger: logs.Logger(1)})
	defer v.Close()
	v.OnLogin(piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: kubeconfig}), login.Timeout(5*time.Second))

	ctx, cancel := context.WithTimeout(context.Background(), loadFor+20*time.Second)
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
	t.Logf("%d requests by %d callers in %v; %d tokens issued; accepted at the webhook: %d, rejected: %d (%s)",
		stats.Requests, workers, loadFor, g.issued.Load(), accepted, rejected, strings.Join(why, "; "))
	if stats.FirstError != nil {
		t.Errorf("%d of %d requests failed (%d 401s), want none; the first: %v", stats.Unauthorized+stats.OtherErrors, stats.Requests, stats.Unauthorized, stats.FirstError)
	}
	if stats.Requests < workers*10 {
		t.Errorf("%d requests in %v, want at least %d: the load did not run", stats.Requests, loadFor, workers*10)
	}
	if accepted < 3 {
		t.Errorf("%d tokens accepted, want at least 3: the tokens did not rotate as they expired", accepted)
	}
	if g.issued.Load() < revoked || rejected == 0 {
		t.Errorf("%d tokens issued, %d rejected: want the revoked token sent and rejected by the webhook", g.issued.Load(), rejected)
	}

	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Username; got != saEmail {
		t.Errorf("the API server sees %q, want %q", got, saEmail)
	}

	out := logs.String()
	for _, tok := range auth.Tokens() {
		if strings.Contains(out, tok) {
			t.Errorf("the vault's log shows a token")
			break
		}
	}
	if strings.Contains(out, pemBody(testKeyPEM())) {
		t.Error("the vault's log shows the service account's key")
	}
	if t.Failed() {
		t.Logf("the vault's log:\n%s", out)
	}
}

// writeGKEKubeconfig writes a kubeconfig as `gcloud container clusters
// get-credentials` does, for server, and returns its path.
func writeGKEKubeconfig(t *testing.T, server string, ca []byte) string {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["gke"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["gke"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion:         "client.authentication.k8s.io/v1beta1",
		Command:            "gke-gcloud-auth-plugin", // not on this machine: if it ran, the login would fail
		Args:               []string{"--use_application_default_credentials"},
		InstallHint:        "Install gke-gcloud-auth-plugin for use with kubectl",
		ProvideClusterInfo: true,
		InteractiveMode:    clientcmdapi.IfAvailableExecInteractiveMode,
	}}
	cfg.Contexts["gke"] = &clientcmdapi.Context{Cluster: "gke", AuthInfo: "gke"}
	cfg.CurrentContext = "gke"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenInfo is GKE's side: a token is good when Google's tokeninfo at url
// says whom it speaks for and that it has time left.
func tokenInfo(url string) func(tok string) (string, error) {
	return func(tok string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?access_token="+neturl.QueryEscape(tok), nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", fmt.Errorf("tokeninfo unreachable")
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("tokeninfo answered %d", resp.StatusCode)
		}
		var info struct {
			Email     string `json:"email"`
			ExpiresIn int    `json:"expires_in"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.Email == "" {
			return "", fmt.Errorf("tokeninfo named no one")
		}
		return info.Email, nil
	}
}
