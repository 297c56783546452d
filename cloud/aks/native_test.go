package aks_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/piggyback"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

const (
	publicCloud = "login.microsoftonline.com"
	msiEndpoint = "http://localhost:42356/msi/token" // App Service's, redirected to the stand-in
	msiClient   = "5c0e8f2a-msi-client"
	msiResource = "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/operator"
)

// The modes an operator's pod uses, each with its flags in both forms and
// its environment (this process's or the kubeconfig's), reach Entra ID
// with the client, tenant and scope asked for; no kubelogin runs.
func TestNativeServesKubelogin(t *testing.T) {
	e := newEntra(t)
	useNative(t, e)
	tokenFile := writeFile(t, "azure-identity-token", []byte(assertion))
	_, certPEM := spnCert()
	certFile := writeFile(t, "spn.pem", certPEM)
	authority := e.srv.URL + "/"
	stand := strings.TrimPrefix(e.srv.URL, "https://")
	custom := "api://aks-custom-server"
	for _, tt := range []struct {
		name    string
		exec    clientcmdapi.ExecConfig
		env     map[string]string // this process's
		kubeEnv []clientcmdapi.ExecEnvVar
		scope   string
		want    tokenRequest
	}{
		{name: "workloadidentity, flags", exec: kubelogin("--login", "workloadidentity", "--server-id", aks.DefaultServerID, "--client-id", client,
			"--tenant-id", tenant, "--federated-token-file", tokenFile, "--authority-host", authority),
			want: tokenRequest{host: stand, client: client, grant: "assertion"}},
		{name: "workloadidentity, flags with =", exec: kubelogin("-l=workloadidentity", "--server-id="+aks.DefaultServerID, "--client-id="+client,
			"-t="+tenant, "--federated-token-file="+tokenFile, "--authority-host="+authority, "--disable-instance-discovery"),
			want: tokenRequest{host: stand, client: client, grant: "assertion"}},
		{name: "workloadidentity, the pod's environment", exec: kubelogin("--login", "workloadidentity", "--server-id", aks.DefaultServerID),
			env: map[string]string{"AZURE_CLIENT_ID": client, "AZURE_TENANT_ID": tenant, "AZURE_FEDERATED_TOKEN_FILE": tokenFile,
				"AZURE_AUTHORITY_HOST": "https://" + publicCloud + "/"},
			want: tokenRequest{host: publicCloud, client: client, grant: "assertion"}},
		{name: "workloadidentity, the kubeconfig's environment over the flag", exec: kubelogin("--server-id", aks.DefaultServerID, "--client-id", "someone-else"),
			kubeEnv: []clientcmdapi.ExecEnvVar{{Name: "AAD_LOGIN_METHOD", Value: "workloadidentity"}, {Name: "AZURE_CLIENT_ID", Value: client},
				{Name: "AZURE_TENANT_ID", Value: tenant}, {Name: "AZURE_FEDERATED_TOKEN_FILE", Value: tokenFile}},
			want: tokenRequest{host: publicCloud, client: client, grant: "assertion"}},
		{name: "spn, client secret", exec: kubelogin("--login", "spn", "--server-id", aks.DefaultServerID, "--client-id", client,
			"--tenant-id", tenant, "--client-secret", secret, "--environment", "AzurePublicCloud"),
			want: tokenRequest{host: publicCloud, client: client, grant: "secret"}},
		{name: "spn, client secret from the environment, China", exec: kubelogin("--login=spn", "--server-id", aks.DefaultServerID, "-e", "AzureChinaCloud"),
			kubeEnv: []clientcmdapi.ExecEnvVar{{Name: "AAD_SERVICE_PRINCIPAL_CLIENT_ID", Value: client}, {Name: "AAD_SERVICE_PRINCIPAL_CLIENT_SECRET", Value: secret},
				{Name: "AZURE_TENANT_ID", Value: tenant}},
			want: tokenRequest{host: "login.chinacloudapi.cn", client: client, grant: "secret"}},
		{name: "spn, Terraform's variables", exec: kubelogin("--login", "spn", "--server-id", aks.DefaultServerID, "--use-azurerm-env-vars"),
			env:  map[string]string{"ARM_CLIENT_ID": client, "ARM_TENANT_ID": tenant, "ARM_CLIENT_SECRET": secret, "AZURE_CLIENT_SECRET": "not-this-one"},
			want: tokenRequest{host: publicCloud, client: client, grant: "secret"}},
		{name: "spn, certificate", exec: kubelogin("--login", "spn", "--server-id", aks.DefaultServerID, "--client-id", client,
			"--tenant-id", tenant, "--client-certificate", certFile),
			want: tokenRequest{host: publicCloud, client: client, grant: "certificate"}},
		{name: "spn, another server ID", exec: kubelogin("--login", "spn", "--server-id", custom+"/", "--client-id", client,
			"--tenant-id", tenant, "--client-secret="+secret), scope: custom + "/.default",
			want: tokenRequest{host: publicCloud, client: client, grant: "secret"}},
		{name: "msi, client ID", exec: kubelogin("--login", "msi", "--server-id", aks.DefaultServerID, "--client-id", msiClient),
			env:  map[string]string{"IDENTITY_ENDPOINT": msiEndpoint, "IDENTITY_HEADER": msiHeader},
			want: tokenRequest{host: "localhost:42356", client: msiClient, grant: "msi"}},
		{name: "msi, resource ID", exec: kubelogin("-lmsi", "--server-id="+aks.DefaultServerID, "--identity-resource-id="+msiResource, "--cache-dir", "/tmp/k", "-v", "5"),
			env:  map[string]string{"IDENTITY_ENDPOINT": msiEndpoint, "IDENTITY_HEADER": msiHeader},
			want: tokenRequest{host: "localhost:42356", client: msiResource, grant: "msi"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t, tt.env)
			scope := cmpOr(tt.scope, wantScope)
			e.setScope(scope)
			tt.want.scope = scope
			if tt.want.grant == "msi" {
				tt.want.scope = strings.TrimSuffix(scope, "/.default")
			}
			tt.exec.Env = tt.kubeEnv
			if !aks.Native().Serves(tt.exec) {
				t.Fatal("Serves: false")
			}
			before := len(e.asked())
			info, err := handlers.Exec(handlers.ExecConfig{ExecConfig: tt.exec, Cluster: login.ConnectionInfo{Server: server, CAData: testCA()}})(
				login.WithReason(context.Background(), login.Reason{Kind: login.Refresh})) // not a kept token of an earlier case
			if err != nil {
				t.Fatal(err)
			}
			asked := e.asked()[before:]
			if len(asked) != 1 || asked[0] != tt.want {
				t.Errorf("the stand-in was asked %+v, want %+v", asked, tt.want)
			}
			if !strings.HasPrefix(info.Token, "eyJ.aks-") || info.Server != server || !bytes.Equal(info.CAData, testCA()) || !near(info.Expiration, e.expiry()) {
				t.Errorf("got %v, want the stand-in's token with the kubeconfig's server and CA, and its expiry", info)
			}
		})
	}
}

// What a served mode takes and this login does not understand is an error
// that names it, never its value, and nothing is asked of Entra ID.
func TestNativeRefusesWhatItDoesNotUnderstand(t *testing.T) {
	e := newEntra(t)
	useNative(t, e)
	cleanEnv(t, map[string]string{"IDENTITY_ENDPOINT": msiEndpoint, "IDENTITY_HEADER": msiHeader})
	spn := []string{"--login", "spn", "--server-id", aks.DefaultServerID, "--client-id", client, "--tenant-id", tenant}
	for _, tt := range []struct {
		exec clientcmdapi.ExecConfig
		want string
	}{
		{kubelogin(append(spn, "--client-secret", secret, "--subscription", "prod")...), "argument --subscription is not one"},
		{kubelogin(append(spn, "--client-secret", secret, "--pop-claim=u=x")...), "argument --pop-claim is not one"},
		{kubelogin("--login", "msi", "--server-id", aks.DefaultServerID, "--client-secret", secret), "argument --client-secret is not one --login msi takes"},
		{kubelogin("--login", "msi", "--server-id", aks.DefaultServerID, "--federated-token-file", "/f"), "argument --federated-token-file is not one --login msi takes"},
		{kubelogin("--login", "msi"), "--server-id is required"},
		{kubelogin("--login", "msi", "--server-id"), "argument --server-id has no value"},
		{kubelogin("--login", "msi", "--server-id", aks.DefaultServerID, "extra"), "1 positional arguments"},
		{kubelogin("--login", "msi", "--server-id", aks.DefaultServerID, "--environment", "AzureStackCloud"), `--environment "AzureStackCloud" is not a cloud`},
		{kubelogin("--login", "msi", "--server-id", aks.DefaultServerID, "--authority-host", "http://entra.example/"), "want an https URL"},
		{kubelogin("--login", "msi", "--server-id", aks.DefaultServerID, "--timeout", "soon"), "argument --timeout is not a positive duration"},
		{kubelogin("--login", "msi", "--server-id", aks.DefaultServerID, "--disable-instance-discovery=maybe"), "argument --disable-instance-discovery: want true or false"},
		{kubelogin("--login", "workloadidentity", "--server-id", aks.DefaultServerID, "--client-id", client, "--tenant-id", tenant), "needs a federated token file"},
		{kubelogin(spn...), "needs a client secret or a client certificate"},
		{func() clientcmdapi.ExecConfig {
			x := kubelogin(spn...)
			x.Env = []clientcmdapi.ExecEnvVar{{Name: "AZURE_CLIENT_SECRET", Value: secret}, {Name: "AZURE_PASSWORD", Value: secret}}
			return x
		}(), "environment variable AZURE_PASSWORD is not one this login understands with --login spn"},
		{func() clientcmdapi.ExecConfig {
			x := kubelogin("--login", "msi", "--server-id", aks.DefaultServerID)
			x.Env = []clientcmdapi.ExecEnvVar{{Name: "IDENTITY_HEADER", Value: msiHeader}}
			return x
		}(), "environment variable IDENTITY_HEADER is not one"},
		{func() clientcmdapi.ExecConfig {
			x := kubelogin("--login", "msi", "--server-id", aks.DefaultServerID)
			x.Env = []clientcmdapi.ExecEnvVar{{Name: "AZURE_CLIENT_SECRET", Value: secret}}
			return x
		}(), "environment variable AZURE_CLIENT_SECRET is not one this login understands with --login msi"},
	} {
		if !aks.Native().Serves(tt.exec) {
			t.Errorf("%q: Serves false, want true (and an error)", tt.exec.Args)
			continue
		}
		_, err := handlers.Exec(handlers.ExecConfig{ExecConfig: tt.exec, Cluster: login.ConnectionInfo{Server: server, CAData: testCA()}})(context.Background())
		var perm *login.PermanentError
		if !errors.As(err, &perm) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want a permanent error with %q", tt.exec.Args, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), msiHeader)) {
			t.Errorf("the error quotes a secret: %v", err)
		}
	}
	for _, cluster := range []login.ConnectionInfo{{Server: server}, {Server: server, CAData: testCA(), Insecure: true}} {
		_, err := handlers.Exec(handlers.ExecConfig{ExecConfig: kubelogin("--login", "msi", "--server-id", aks.DefaultServerID), Cluster: cluster})(context.Background())
		if err == nil || !strings.Contains(err.Error(), "has no CA to verify it with") {
			t.Errorf("a cluster with no CA, or insecure: %v, want a refusal", err)
		}
	}
	if n := len(e.asked()); n != 0 {
		t.Errorf("%d requests reached the stand-in", n)
	}
}

// kubelogin's modes that ask a person or a tool, and the tokens this login
// cannot make, are not served: the plugin runs as before.
func TestNativeLeavesOtherModesToThePlugin(t *testing.T) {
	cleanEnv(t, nil)
	n := aks.Native()
	withEnv := func(x clientcmdapi.ExecConfig, env ...string) clientcmdapi.ExecConfig {
		for i := 0; i+1 < len(env); i += 2 {
			x.Env = append(x.Env, clientcmdapi.ExecEnvVar{Name: env[i], Value: env[i+1]})
		}
		return x
	}
	s := []string{"--server-id", aks.DefaultServerID}
	for _, tt := range []struct {
		exec clientcmdapi.ExecConfig
		want bool
	}{
		{kubelogin(s...), false}, // devicecode, kubelogin's default
		{kubelogin(append(s, "--login", "interactive")...), false},
		{kubelogin(append(s, "--login", "azurecli")...), false},
		{kubelogin(append(s, "-l", "azd")...), false},
		{kubelogin(append(s, "--login=ropc")...), false},
		{kubelogin(append(s, "--login", "azurepipelines")...), false},
		{kubelogin(append(s, "--login", "spn", "--pop-enabled", "--pop-claims", "u=/arm/id")...), false},
		{kubelogin(append(s, "--login", "spn", "--legacy")...), false},
		{withEnv(kubelogin(append(s, "--login", "workloadidentity")...), "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "t", "ACTIONS_ID_TOKEN_REQUEST_URL", "https://gh"), false},
		{withEnv(kubelogin(append(s, "--login", "msi")...), "AAD_LOGIN_METHOD", "devicecode"), false}, // the environment wins, as in kubelogin
		{withEnv(kubelogin(s...), "AAD_LOGIN_METHOD", "msi"), true},
		{withEnv(kubelogin(append(s, "--disable-environment-override")...), "AAD_LOGIN_METHOD", "msi"), false},
		{clientcmdapi.ExecConfig{Command: "kubelogin", Args: []string{"convert-kubeconfig", "--login", "msi"}}, false},
		{clientcmdapi.ExecConfig{Command: "kubectl-kubelogin", Args: []string{"get-token", "--login", "msi"}}, false},
		{clientcmdapi.ExecConfig{Command: "/usr/local/bin/kubelogin", Args: []string{"get-token", "--login", "msi"}}, true},
	} {
		if got := n.Serves(tt.exec); got != tt.want {
			t.Errorf("Serves(%s %q, env %v): got %v, want %v", tt.exec.Command, tt.exec.Args, tt.exec.Env, got, tt.want)
		}
	}

	// And through Exec: the plugin itself runs.
	e := newEntra(t)
	useNative(t, e)
	marker := filepath.Join(t.TempDir(), "ran")
	plugin := writeFile(t, "kubelogin", []byte("#!/bin/sh\ntouch "+marker+"\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-plugin\"}}'\n"))
	if err := os.Chmod(plugin, 0o700); err != nil {
		t.Fatal(err)
	}
	x := kubelogin(append(s, "--login", "azurecli")...)
	x.Command = plugin
	info, err := handlers.Exec(handlers.ExecConfig{ExecConfig: x, Cluster: login.ConnectionInfo{Server: server}})(context.Background())
	if err != nil || info.Token != "from-plugin" {
		t.Errorf("--login azurecli: %v, %v, want the plugin's own token", info, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("the plugin did not run")
	}
}

// A kubeconfig from a Secret is refused whatever its policy: kubelogin
// names no cluster, so its server cannot be checked. No token is asked for.
func TestNativeRefusesAKubeconfigFromElsewhere(t *testing.T) {
	e := newEntra(t)
	useNative(t, e)
	tokenFile := writeFile(t, "token", []byte(assertion))
	cleanEnv(t, map[string]string{"AZURE_CLIENT_ID": client, "AZURE_TENANT_ID": tenant, "AZURE_FEDERATED_TOKEN_FILE": tokenFile})
	hub := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k"},
		Data: map[string][]byte{"value": kubeconfigYAML("https://attacker.example", "--login", "workloadidentity", "--server-id", aks.DefaultServerID)}})
	read := func(policy handlers.PluginPolicy) error {
		_, err := handlers.KubeconfigSecretFrom(handlers.KubeconfigSecretConfig{Client: hub.CoreV1(), Namespace: "ns", Name: "k", PluginPolicy: policy})(context.Background())
		return err
	}
	if err := read(handlers.DenyAll); err == nil || !strings.Contains(err.Error(), "handlers.AllowNative") {
		t.Errorf("under DenyAll: %v, want a refusal naming AllowNative", err)
	}
	err := read(handlers.AllowNative(handlers.DenyAll, "aks"))
	var perm *login.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "a kubeconfig from elsewhere may not use the native AKS login: kubelogin names no cluster") {
		t.Errorf("allowed by name: %v, want a permanent refusal", err)
	}
	if n := len(e.asked()); n != 0 {
		t.Errorf("%d tokens asked for", n)
	}
}

// kubeconfigYAML is a kubeconfig for server whose user runs kubelogin
// get-token with args.
func kubeconfigYAML(server string, args ...string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: u
  user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: kubelogin, args: [get-token, %s], interactiveMode: Never}}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, server, b64(testCA()), strings.Join(args, ", "))
}

// A kubeconfig file of this machine's that names kubelogin logs in
// natively through piggyback.Kubeconfig: kubelogin is not on PATH, so
// nothing ran it.
func TestNativeThroughAKubeconfigFile(t *testing.T) {
	e := newEntra(t)
	useNative(t, e)
	tokenFile := writeFile(t, "token", []byte(assertion))
	cleanEnv(t, map[string]string{"AZURE_CLIENT_ID": client, "AZURE_TENANT_ID": tenant, "AZURE_FEDERATED_TOKEN_FILE": tokenFile})
	t.Setenv("PATH", t.TempDir())
	path := writeFile(t, "kubeconfig", kubeconfigYAML(server, "--login", "workloadidentity", "--server-id", aks.DefaultServerID))
	info, err := piggyback.KubeconfigFrom(piggyback.KubeconfigOptions{Path: path})(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.Token, "eyJ.aks-") || info.Server != server || !bytes.Equal(info.CAData, testCA()) {
		t.Errorf("got %v, want the stand-in's token for the file's server and CA", info)
	}
	if asked := e.asked(); len(asked) != 1 || asked[0].grant != "assertion" || asked[0].client != client {
		t.Errorf("the stand-in was asked %+v", asked)
	}
}

// Every login but a first one makes a new credential, so a refresh gets a
// new token from Entra ID (or the managed identity endpoint), not the one
// azidentity or MSAL keeps; a first login takes the kept one.
func TestNativeFreshTokens(t *testing.T) {
	e := newEntra(t)
	useNative(t, e)
	tokenFile := writeFile(t, "token", []byte(assertion))
	cleanEnv(t, map[string]string{"IDENTITY_ENDPOINT": msiEndpoint, "IDENTITY_HEADER": msiHeader})
	for _, x := range []clientcmdapi.ExecConfig{
		kubelogin("--login", "workloadidentity", "--server-id", aks.DefaultServerID, "--client-id", client, "--tenant-id", tenant, "--federated-token-file", tokenFile),
		kubelogin("--login", "spn", "--server-id", aks.DefaultServerID, "--client-id", client, "--tenant-id", tenant, "--client-secret", secret),
		kubelogin("--login", "msi", "--server-id", aks.DefaultServerID, "--client-id", msiClient),
	} {
		t.Run(x.Args[2], func(t *testing.T) {
			h, err := aks.Native().Handler(handlers.NativeRequest{Exec: x, Cluster: login.ConnectionInfo{Server: server, CAData: testCA()}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, kind := range []login.ReasonKind{login.FirstLogin, login.FirstLogin, login.Refresh, login.Refresh, login.Rejected} {
				info, err := h(login.WithReason(context.Background(), login.Reason{Kind: kind}))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, info.Token)
			}
			if got[1] != got[0] || got[2] == got[1] || got[3] == got[2] || got[4] == got[3] {
				t.Errorf("tokens of first, first, refresh, refresh, rejected: %q; want the first shared, then each new", got)
			}
		})
	}
}

// No secret of a kubeconfig or of the pod — client secret, federated
// token, managed identity header — shows in an error or in the vault's
// log, even when Entra ID echoes the request in its answer.
func TestNativeKeepsSecretsOut(t *testing.T) {
	e := newEntra(t)
	e.echo.Store(true)
	useNative(t, e)
	tokenFile := writeFile(t, "token", []byte(assertion))
	cleanEnv(t, map[string]string{"IDENTITY_ENDPOINT": msiEndpoint, "IDENTITY_HEADER": msiHeader})
	for _, tt := range []struct {
		exec clientcmdapi.ExecConfig
		from string
	}{
		{kubelogin("--login", "spn", "--server-id", aks.DefaultServerID, "--client-id", client, "--tenant-id", tenant, "--client-secret", secret),
			`kubelogin --login spn (client "` + client + `", tenant "` + tenant + `", client secret)`},
		{func() clientcmdapi.ExecConfig {
			x := kubelogin("--login", "spn", "--server-id", aks.DefaultServerID)
			x.Env = []clientcmdapi.ExecEnvVar{{Name: "AZURE_CLIENT_ID", Value: client}, {Name: "AZURE_TENANT_ID", Value: tenant}, {Name: "AZURE_CLIENT_SECRET", Value: secret}}
			return x
		}(), `kubelogin --login spn (client "` + client + `"`},
		{kubelogin("--login", "workloadidentity", "--server-id", aks.DefaultServerID, "--client-id", client, "--tenant-id", tenant, "--federated-token-file", tokenFile),
			`kubelogin --login workloadidentity (client "` + client + `", tenant "` + tenant + `", token file ` + tokenFile + `)`},
	} {
		var logs testlog.Buffer
		v := vault.New(vault.Options{NoFallback: true, Logger: logs.Logger(9)})
		v.OnLogin(handlers.Exec(handlers.ExecConfig{ExecConfig: tt.exec, Cluster: login.ConnectionInfo{Server: server, CAData: testCA()}}), login.ID("aks"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := v.Select(ctx)
		cancel()
		v.Close()
		if err == nil {
			t.Fatalf("%q: no error from an Entra ID that answers 401", tt.exec.Args)
		}
		for _, want := range []string{tt.from, "HTTP 401 invalid_client (AADSTS7000215)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		shown := strings.Join([]string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), logs.String()}, "\n")
		for _, s := range []string{secret, assertion, msiHeader} {
			if strings.Contains(shown, s) {
				t.Errorf("a secret shows in %q", shown)
			}
		}
	}
}

// --timeout bounds the login, as it bounds a kubelogin run.
func TestNativeTimeout(t *testing.T) {
	e := newEntra(t)
	e.hang.Store(true)
	useNative(t, e)
	cleanEnv(t, nil)
	x := kubelogin("--login", "spn", "--server-id", aks.DefaultServerID, "--client-id", client, "--tenant-id", tenant,
		"--client-secret", secret, "--timeout", "200ms")
	start := time.Now()
	_, err := handlers.Exec(handlers.ExecConfig{ExecConfig: x, Cluster: login.ConnectionInfo{Server: server, CAData: testCA()}})(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the deadline's error", err)
	}
	// The endpoint hangs: only the timeout ends the login, whatever a busy
	// machine adds to it.
	if d := time.Since(start); d > testwait.Hang {
		t.Errorf("the login took %v with --timeout 200ms", d)
	}
}

// Native's handler, asked directly (as a user of handlers.Native may),
// quotes no argument that is not a flag's name and no value of the
// environment, and no URL's user info: each may be a secret, and errors
// reach logs. (Inputs FuzzNativeGetToken found, and their kin.)
func TestNativeErrorsQuoteNoValue(t *testing.T) {
	cleanEnv(t, nil)
	const url = "https://entra:" + secret + "@login.example"
	msi := []string{"get-token", "--login", "msi", "--server-id", aks.DefaultServerID}
	for _, tt := range []struct {
		args []string
		env  []clientcmdapi.ExecEnvVar
		want string
	}{
		{[]string{"--client-secret=" + secret}, nil, "the arguments do not start with get-token"},
		{[]string{"convert-kubeconfig", "--client-secret", secret}, nil, "the arguments do not start with get-token"},
		{msi[:1], []clientcmdapi.ExecEnvVar{{Name: "AAD_LOGIN_METHOD", Value: secret}}, "AAD_LOGIN_METHOD names a mode this login does not serve"},
		{append(msi, "--authority-host", url), nil, `--authority-host "https://[redacted]@login.example": want an https URL`},
		{[]string{"get-token", "--login", "workloadidentity", "--server-id", aks.DefaultServerID, "--federated-token-file", "/f", "--client-id", client, "--tenant-id", tenant},
			[]clientcmdapi.ExecEnvVar{{Name: "AZURE_AUTHORITY_HOST", Value: url}}, "AZURE_AUTHORITY_HOST: want an https URL"},
		// A flag whose value is missing takes the next, as pflag does.
		{[]string{"get-token", "--login", "--client-secret=" + secret, "--server-id", aks.DefaultServerID}, nil, `--login (its value starts with "-"`},
		{append(msi, "--environment", "--client-secret="+secret), nil, `--environment (its value starts with "-"`},
		{append(msi, "--authority-host", "--client-secret="+secret), nil, `--authority-host (its value starts with "-"`},
	} {
		exec := clientcmdapi.ExecConfig{Command: "kubelogin", Args: tt.args, Env: tt.env}
		_, err := aks.Native().Handler(handlers.NativeRequest{Exec: exec, Cluster: login.ConnectionInfo{Server: server, CAData: testCA()}})
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%q, env %v: %v, want an error with %q, without the secret", tt.args, tt.env, err, tt.want)
		}
	}
}

// A flag given twice, in any of kubelogin's spellings, or a variable set
// twice in the kubeconfig, counts at its last value, as kubelogin (pflag,
// and a process's environment) takes it: the login asks Entra ID as the
// plugin would have.
func TestNativeTakesTheLastValue(t *testing.T) {
	e := newEntra(t)
	useNative(t, e)
	cleanEnv(t, nil)
	e.setScope(wantScope)
	for _, tt := range []struct {
		name    string
		exec    clientcmdapi.ExecConfig
		kubeEnv []clientcmdapi.ExecEnvVar
		want    tokenRequest
	}{
		{name: "flags", exec: kubelogin("--login", "msi", "-lspn", "--server-id", aks.DefaultServerID, "--client-id", "first-given", "--client-id="+client,
			"-t", "first-given", "--tenant-id", tenant, "--client-secret", "first-given", "--client-secret="+secret,
			"-e", "AzureChinaCloud", "--environment=AzurePublicCloud"),
			want: tokenRequest{host: publicCloud, client: client, grant: "secret", scope: wantScope}},
		{name: "shorthands", exec: kubelogin("-l=msi", "-l", "spn", "--server-id", aks.DefaultServerID, "--client-id", client,
			"-tfirst-given", "-t="+tenant, "--client-secret", secret, "--environment", "AzurePublicCloud", "-eAzureChinaCloud"),
			want: tokenRequest{host: "login.chinacloudapi.cn", client: client, grant: "secret", scope: wantScope}},
		{name: "variables", exec: kubelogin("--login", "spn", "--server-id", aks.DefaultServerID, "--tenant-id", tenant),
			kubeEnv: []clientcmdapi.ExecEnvVar{{Name: "AZURE_CLIENT_ID", Value: "first-given"}, {Name: "AZURE_CLIENT_SECRET", Value: "first-given"},
				{Name: "AZURE_CLIENT_ID", Value: client}, {Name: "AZURE_CLIENT_SECRET", Value: secret}},
			want: tokenRequest{host: publicCloud, client: client, grant: "secret", scope: wantScope}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.exec.Env = tt.kubeEnv
			before := len(e.asked())
			_, err := handlers.Exec(handlers.ExecConfig{ExecConfig: tt.exec, Cluster: login.ConnectionInfo{Server: server, CAData: testCA()}})(
				login.WithReason(context.Background(), login.Reason{Kind: login.Refresh}))
			if err != nil {
				t.Fatal(err)
			}
			if asked := e.asked()[before:]; len(asked) != 1 || asked[0] != tt.want {
				t.Errorf("the stand-in was asked %+v, want %+v", asked, tt.want)
			}
		})
	}
}
