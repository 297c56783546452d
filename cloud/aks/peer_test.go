package aks_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/peers"
	"github.com/authvault/authvault/vault"
)

// kubeloginExec is the exec plugin kubelogin (the real binary, from
// AUTHVAULT_PEERS) in workload identity mode, as AKS kubeconfigs converted
// with `kubelogin convert-kubeconfig -l workloadidentity` name it, with
// Entra ID at the stand-in, given by flags (kubelogin lets its environment
// variables, AAD_LOGIN_METHOD and AZURE_*, win over its flags even when
// empty: none is set here): the federated token is a file, and the Go
// binary trusts the stand-in's certificate through SSL_CERT_FILE.
// Instance discovery is off: the stand-in, like any authority that is not
// Entra ID's public cloud, has no discovery endpoint (the native login's
// credentials are built with DisableInstanceDiscovery too). Its home is a
// directory of the test's (see withHome).
func kubeloginExec(tb testing.TB, e *entra) handlers.ExecConfig {
	tb.Helper()
	dir := tb.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			tb.Fatal(err)
		}
		return p
	}
	tokenFile := write("azure-identity-token", []byte(assertion))
	ca := write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.srv.Certificate().Raw}))
	cfg := handlers.ExecConfig{
		ExecConfig: clientcmdapi.ExecConfig{
			Command: peers.Binary(tb, "kubelogin"),
			Args: []string{"get-token", "--login", "workloadidentity", "--server-id", aks.DefaultServerID,
				"--client-id", client, "--tenant-id", tenant, "--authority-host", e.srv.URL + "/",
				"--federated-token-file", tokenFile, "--disable-instance-discovery"},
			APIVersion: "client.authentication.k8s.io/v1beta1",
			Env: []clientcmdapi.ExecEnvVar{
				{Name: "SSL_CERT_FILE", Value: ca},
				{Name: "AZURE_CLIENT_SECRET", Value: ""},
			},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		},
		Cluster: login.ConnectionInfo{Server: server, CAData: testCA()},
	}
	return withHome(cfg, dir)
}

// withHome is cfg run with home as its home directory. kubelogin get-token
// keeps the tokens it gets in a cache of its own, a file under
// $XDG_CACHE_HOME (default $HOME/.cache) encrypted with a key it keeps on
// the user's kernel keyring, and answers a later run from it while the
// token has more than a few minutes left: a new home is a run with nothing
// cached, and no cache of this machine's user is read or written.
func withHome(cfg handlers.ExecConfig, home string) handlers.ExecConfig {
	cfg.Env = slices.Concat(cfg.Env, []clientcmdapi.ExecEnvVar{
		{Name: "HOME", Value: home},
		{Name: "XDG_CACHE_HOME", Value: filepath.Join(home, ".cache")},
		{Name: "KUBECACHEDIR", Value: filepath.Join(home, ".kube", "cache", "kubelogin")},
	})
	return cfg
}

// The real kubelogin, run as the exec plugin it is by handlers.Exec under a
// vault, gets a token from the stand-in Entra ID by the same grant as the
// native login in workload identity mode (a client assertion from the
// federated token file, for the AKS server application's scope, both
// checked by the stand-in): each token is the one the stand-in issued for
// its request, expiring when the stand-in said. Run again, kubelogin
// answers from the cache it keeps in its home.
func TestKubeloginPluginAndNativeGetTheIssuedToken(t *testing.T) {
	e := newEntra(t)
	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	cfg := kubeloginExec(t, e)
	v.OnLogin(handlers.Exec(cfg), login.Timeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cred, err := v.Select(ctx)
	if err != nil {
		t.Fatalf("the vault with kubelogin as its plugin: %v", err)
	}
	plugin := cred.Info
	if n := e.issued.Load(); n != 1 || plugin.Token != "eyJ.aks-1" {
		t.Errorf("plugin: token %.9q…, %d issued; want the stand-in's first, eyJ.aks-1", plugin.Token, n)
	}

	// Run again in the same home, kubelogin answers from its cache
	// (see withHome): the same token, nothing asked of Entra ID.
	again, err := handlers.Exec(cfg)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.issued.Load(); n != 1 || again.Token != plugin.Token {
		t.Errorf("plugin, run again: %d issued, same token: %v; want kubelogin's cached token", n, again.Token == plugin.Token)
	}

	setWorkloadEnv(t)
	native, err := aks.LoginWith(opts(nil), time.Now, e.newDefault)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint("eyJ.aks-", e.issued.Load()); e.issued.Load() != 2 || native.Token != want {
		t.Errorf("native: token %.9q…, %d issued; want the stand-in's second, eyJ.aks-2", native.Token, e.issued.Load())
	}
	for name, info := range map[string]*login.ConnectionInfo{"plugin": plugin, "native": native} {
		if !near(info.Expiration, e.expiry()) {
			t.Errorf("%s: expires at %v, want about %v, as the stand-in said", name, info.Expiration, e.expiry())
		}
		if info.Server != server {
			t.Errorf("%s: server %q, want %q", name, info.Server, server)
		}
	}
}
