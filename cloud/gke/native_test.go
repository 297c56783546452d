package gke_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// useNative makes Native serve for one test.
func useNative(t *testing.T) {
	handlers.UseNative(gke.Native())
	t.Cleanup(func() { handlers.UseNative(handlers.Native{Name: "gke"}) }) // serves nothing
}

// pluginExec is a kubeconfig user's gke-gcloud-auth-plugin, which would
// touch marker if it ran.
func pluginExec(t *testing.T, marker string, args ...string) clientcmdapi.ExecConfig {
	path := filepath.Join(t.TempDir(), "gke-gcloud-auth-plugin")
	script := "#!/bin/sh\ntouch " + marker + "\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-plugin\"}}'\n"
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return clientcmdapi.ExecConfig{Command: path, Args: args, APIVersion: "client.authentication.k8s.io/v1beta1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
}

// gke-gcloud-auth-plugin --use_application_default_credentials is served
// by Login with ADC and the kubeconfig's server and CA (read from its file
// too); without the flag the plugin runs as before.
func TestNativeServesThePluginWithADC(t *testing.T) {
	g := newStandIn(t)
	key := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(key, g.keyJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", key)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, testCA(), 0o600); err != nil {
		t.Fatal(err)
	}
	useNative(t)
	marker := filepath.Join(t.TempDir(), "ran")

	for _, cluster := range []login.ConnectionInfo{{Server: server, CAData: testCA()}, {Server: server, CAPath: ca}} {
		info, err := handlers.Exec(handlers.ExecConfig{ExecConfig: pluginExec(t, marker, "--use_application_default_credentials"),
			Cluster: cluster})(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(info.Token, "ya29.sa-") || info.Server != server || !bytes.Equal(info.CAData, testCA()) || info.Expiration.IsZero() {
			t.Errorf("got %v, want the stand-in's token with the kubeconfig's server and CA, and an expiry", info)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the plugin ran")
	}
	// The plugin's scopes, so that GKE names the identity as it would
	// have: a service account by its email.
	for _, got := range g.asked() {
		if !slices.Equal(slices.Sorted(slices.Values(got)), []string{scope, emailScope}) {
			t.Errorf("scopes asked: %q, want %s and %s, as the plugin asks", got, scope, emailScope)
		}
	}
	if len(g.asked()) == 0 {
		t.Error("no token was asked for")
	}

	info, err := handlers.Exec(handlers.ExecConfig{ExecConfig: pluginExec(t, marker), Cluster: login.ConnectionInfo{Server: server}})(context.Background())
	if err != nil || info.Token != "from-plugin" {
		t.Errorf("without the flag: %v, %v, want the plugin's own token", info, err)
	}
}

// What Native does not understand is an error, and a kubeconfig from
// elsewhere is refused whatever its policy: no token is asked for.
func TestNativeRefusesWhatItCannotServe(t *testing.T) {
	g := newStandIn(t)
	useNative(t)
	marker := filepath.Join(t.TempDir(), "ran")
	withEnv := pluginExec(t, marker, "--use_application_default_credentials")
	withEnv.Env = []clientcmdapi.ExecEnvVar{{Name: "CLOUDSDK_CONFIG", Value: "/elsewhere"}}
	for _, tt := range []struct {
		exec   clientcmdapi.ExecConfig
		policy handlers.PluginPolicy
		want   string
	}{
		{pluginExec(t, marker, "--use_application_default_credentials", "--verbosity=debug"), handlers.AllowAll, `argument "--verbosity" is not one`},
		// The flag again, with another value: the plugin would take the
		// last, which this login does not serve.
		{pluginExec(t, marker, "--use_application_default_credentials", "--use_application_default_credentials=false"), handlers.AllowAll,
			`argument "--use_application_default_credentials" is not one`},
		// An argument's value may be a secret: it is never quoted.
		{pluginExec(t, marker, "--use_application_default_credentials", "--access-token=ya29.in-the-kubeconfig"), handlers.AllowAll, `argument "--access-token" is not one`},
		{pluginExec(t, marker, "--use_application_default_credentials", "ya29.in-the-kubeconfig"), handlers.AllowAll, `argument 2, not a flag, is not one`},
		{withEnv, handlers.AllowAll, "environment variable CLOUDSDK_CONFIG is not one"},
		{pluginExec(t, marker, "--use_application_default_credentials"), handlers.AllowNative(handlers.DenyAll, "gke"), "a kubeconfig from elsewhere may not use"},
	} {
		tt.exec.PluginPolicy = tt.policy
		_, err := handlers.Exec(handlers.ExecConfig{ExecConfig: tt.exec, Cluster: login.ConnectionInfo{Server: server, CAData: testCA()}})(context.Background())
		var perm *login.PermanentError
		if !errors.As(err, &perm) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want a permanent error with %q", tt.exec.Args, err, tt.want)
		}
		if strings.Contains(err.Error(), "/elsewhere") || strings.Contains(err.Error(), "ya29.in-the-kubeconfig") {
			t.Errorf("the error quotes an environment or argument value: %v", err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the plugin ran")
	}
	if n := g.issued.Load(); n != 0 {
		t.Errorf("%d tokens issued", n)
	}
}
