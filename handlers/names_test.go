package handlers

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// namesCases are the handlers this package makes, with the names they
// give themselves: what they read, never a secret they are given.
func namesCases() []struct {
	h         login.Handler
	id, label string
} {
	const secret = "s3cret-0123456789"
	return []struct {
		h         login.Handler
		id, label string
	}{
		{TokenFile("/var/run/secrets/tokens/api", login.ConnectionInfo{Server: "https://a", Password: secret}),
			"token file /var/run/secrets/tokens/api", "token file"},
		{Static(login.ConnectionInfo{Server: "https://robot:" + secret + "@api.example:6443", Token: secret}),
			"static credential for https://[redacted]@api.example:6443", "static"},
		{Exec(ExecConfig{ExecConfig: clientcmdapi.ExecConfig{
			Command: "/usr/local/bin/aws-iam-authenticator", Args: []string{"token", "-i", "prod", "--secret", secret},
			Env: []clientcmdapi.ExecEnvVar{{Name: "AWS_SECRET_ACCESS_KEY", Value: secret}},
		}, Cluster: login.ConnectionInfo{Server: "https://" + secret + "@prod.example"}}),
			"exec aws-iam-authenticator", "exec"},
		{TokenRequest(TokenRequestConfig{Namespace: "tenant-a", Name: "deployer", Cluster: login.ConnectionInfo{Token: secret}}),
			"token request tenant-a/deployer", "token request"},
		{KubeconfigSecret(nil, "capi", "prod-kubeconfig", ClusterAPIKey),
			"kubeconfig Secret capi/prod-kubeconfig", "kubeconfig Secret"},
		{KubeconfigSecretFrom(KubeconfigSecretConfig{Namespace: "argo", Name: "prod", Key: "config", Context: "admin@prod"}),
			`kubeconfig Secret argo/prod key "config" context "admin@prod"`, "kubeconfig Secret"},
		{Kubeconfig(KubeconfigConfig{Name: "kubeconfig of tenant a"}), "kubeconfig of tenant a", "kubeconfig"},
		{Kubeconfig(KubeconfigConfig{}), "kubeconfig", "kubeconfig"},
		{RESTConfig(&rest.Config{Host: "https://robot:" + secret + "@api.example:6443", BearerToken: secret}),
			"rest.Config https://[redacted]@api.example:6443", "rest.Config"},
		{RESTConfig(nil), "rest.Config", "rest.Config"},
	}
}

// Every handler of the package names itself after what it reads, in logs,
// errors and Credential.Handler; never with a secret it was given.
func TestHandlersNameThemselves(t *testing.T) {
	for _, tc := range namesCases() {
		s := handlerconf.Configure[login.Option](tc.h)
		if s.ID != tc.id {
			t.Errorf("ID = %q, want %q", s.ID, tc.id)
		}
		if strings.Contains(s.ID, "s3cret") {
			t.Errorf("ID %q holds a secret", s.ID)
		}
		if s := handlerconf.Configure(tc.h, login.ID("mine")); s.ID != "mine" {
			t.Errorf("with login.ID, ID = %q, want mine", s.ID)
		}
	}
}

// A handler's metric label is the kind of what it reads: short, and the
// same whatever file or object it reads, so that no path or name becomes a
// label value.
func TestHandlerLabelsAreShort(t *testing.T) {
	for _, tc := range namesCases() {
		s := handlerconf.Configure[login.Option](tc.h)
		if s.Label != tc.label {
			t.Errorf("%s: label = %q, want %q", s.ID, s.Label, tc.label)
		}
		if len(s.Label) > 20 || strings.ContainsAny(s.Label, "/:\"") {
			t.Errorf("%s: label %q is not short and stable", s.ID, s.Label)
		}
		if s := handlerconf.Configure(tc.h, login.ID("mine")); s.Label != "mine" {
			t.Errorf("with login.ID, label = %q, want mine", s.Label)
		}
	}
}
