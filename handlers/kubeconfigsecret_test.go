package handlers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

const secretToken = "s3cret-token-0123456789abcdef"

// secretKubeconfig is a Cluster API style kubeconfig: one context, data
// inline; user is the YAML flow mapping of the user entry.
func secretKubeconfig(server, caData, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: wl
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: wl-admin
  user: %s
contexts:
- name: wl-admin@wl
  context: {cluster: wl, user: wl-admin, namespace: apps}
current-context: wl-admin@wl
`, server, caData, user)
}

func hubWith(data map[string][]byte) *fake.Clientset {
	return fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: "wl-kubeconfig"},
		Data:       data,
	})
}

func TestKubeconfigSecret(t *testing.T) {
	ca := testpki.NewCA(t)
	caData := base64.StdEncoding.EncodeToString(ca.PEM)
	hub := hubWith(map[string][]byte{"value": []byte(secretKubeconfig("https://wl.example:6443", caData, fmt.Sprintf("{token: %s}", secretToken)))})
	h := KubeconfigSecret(hub.CoreV1(), "capi", "wl-kubeconfig", ClusterAPIKey)

	info, err := h(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Server != "https://wl.example:6443" || info.Token != secretToken || string(info.CAData) != string(ca.PEM) || info.DefaultNamespace != "apps" {
		t.Errorf("got %v", info)
	}

	// A rotated kubeconfig is read at the next login.
	secret, _ := hub.CoreV1().Secrets("capi").Get(context.Background(), "wl-kubeconfig", metav1.GetOptions{})
	secret.Data["value"] = []byte(secretKubeconfig("https://wl.example:6443", caData, "{token: rotated-token}"))
	if _, err := hub.CoreV1().Secrets("capi").Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if info, err := h(context.Background()); err != nil || info.Token != "rotated-token" {
		t.Errorf("after rotation: %v, %v", info, err)
	}
}

// Whatever is wrong, the error names the Secret and the key, is permanent
// when a retry cannot help, and never repeats the kubeconfig's content.
func TestKubeconfigSecretErrors(t *testing.T) {
	ca := testpki.NewCA(t)
	caData := base64.StdEncoding.EncodeToString(ca.PEM)
	_, key := ca.Issue(t, "leaked", false)
	keyData := base64.StdEncoding.EncodeToString(key)
	tokenOnDisk := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenOnDisk, []byte("this-pods-own-token-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := func(user string) []byte {
		return []byte(secretKubeconfig("https://wl.example:6443", caData, user))
	}
	for _, tc := range []struct {
		name      string
		data      map[string][]byte // nil: no Secret at all
		key       string
		permanent bool
		want      []string
	}{
		{"no Secret", nil, "", true, []string{"Secret capi/wl-kubeconfig", "does not exist"}},
		{"no such key", map[string][]byte{"kubeconfig": good("{token: x}")}, "", true, []string{`key "value"`, "no such key", "kubeconfig"}},
		{"empty value", map[string][]byte{"value": []byte("  \n")}, "", true, []string{`key "value"`, "empty"}},
		{"not YAML", map[string][]byte{"value": []byte("token: " + secretToken + "\n\tbad: [")}, "", true, []string{"not a valid kubeconfig"}},
		{"map key quoting the token", map[string][]byte{"value": []byte("users:\n- name: u\n  user: {{" + secretToken + ": x}: y}\n")}, "", true, []string{"not a valid kubeconfig"}},
		{"token of the wrong type", map[string][]byte{"value": good("{token: [" + secretToken + "]}")}, "", true, []string{"not a valid kubeconfig"}},
		{"key data that is not base64", map[string][]byte{"value": good("{client-certificate-data: " + secretToken + "!, client-key-data: " + secretToken + "!}")}, "", true, []string{"not a valid kubeconfig"}},
		{"tokenFile naming this pod's token", map[string][]byte{"value": good("{tokenFile: " + tokenOnDisk + "}")}, "", true, []string{`user "wl-admin"`, "tokenFile names a file of this machine", "inline"}},
		{"client key file", map[string][]byte{"value": good("{client-certificate: /etc/hostname, client-key: /etc/hostname}")}, "", true, []string{"client-key names a file"}},
		{"CA file", map[string][]byte{"value": []byte(strings.Replace(string(good("{token: x}")), "certificate-authority-data: "+fmt.Sprintf("%q", caData), "certificate-authority: /etc/ssl/certs/ca-certificates.crt", 1))}, "", true, []string{"certificate-authority names a file"}},
		{"server with a password and no scheme", map[string][]byte{"value": []byte(secretKubeconfig("admin:"+secretToken+"@wl.example:6443", caData, "{token: x}"))}, "", true, []string{"has no scheme"}},
		{"auth provider", map[string][]byte{"value": good("{auth-provider: {name: oidc, config: {id-token: " + secretToken + "}}}")}, "", true, []string{`auth provider "oidc" is not allowed: plugin policy DenyAll`}},
		{"key in the kubeconfig", map[string][]byte{"value": good("{client-certificate-data: " + caData + ", client-key-data: " + keyData + ", token: " + secretToken + "}")}, "other", true, []string{`key "other"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hub := fake.NewClientset()
			if tc.data != nil {
				hub = hubWith(tc.data)
			}
			_, err := KubeconfigSecretFrom(KubeconfigSecretConfig{Client: hub.CoreV1(), Namespace: "capi", Name: "wl-kubeconfig", Key: tc.key})(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			var perm *login.PermanentError
			if errors.As(err, &perm) != tc.permanent {
				t.Errorf("permanent = %v, want %v", !tc.permanent, tc.permanent)
			}
			for _, want := range append(tc.want, "handlers: ") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q", want)
				}
			}
			for _, secret := range []string{secretToken, "this-pods-own-token", keyData[:40], "PRIVATE KEY"} {
				for _, form := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
					if strings.Contains(form, secret) {
						t.Errorf("error repeats a secret (%.12s…): %s", secret, form)
					}
				}
			}
		})
	}
}

// A kubeconfig from a Secret names any command it likes: under the default
// policy it never runs, and the error is permanent, naming the command and
// the policy; an Allowlist naming it lets it run.
func TestKubeconfigSecretPluginPolicy(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	script := `touch "$0"; echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-plugin"}}'`
	user := fmt.Sprintf("{exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, %q, %q], interactiveMode: Never}}", script, marker)
	hub := hubWith(map[string][]byte{"value": []byte(secretKubeconfig("https://wl.example:6443", base64.StdEncoding.EncodeToString(testpki.NewCA(t).PEM), user))})

	_, err = KubeconfigSecret(hub.CoreV1(), "capi", "wl-kubeconfig", "value")(context.Background())
	var perm *login.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(fmt.Sprint(err), `exec plugin "sh" is not allowed: plugin policy DenyAll`) {
		t.Errorf("default policy: %v, want a permanent error naming sh and DenyAll", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the plugin ran under DenyAll")
	}

	info, err := KubeconfigSecretFrom(KubeconfigSecretConfig{Client: hub.CoreV1(), Namespace: "capi", Name: "wl-kubeconfig", PluginPolicy: Allowlist(sh)})(context.Background())
	if err != nil || info.Token != "from-plugin" {
		t.Fatalf("Allowlist(%s): %v, %v", sh, info, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("the allowed plugin did not run")
	}
}

// An API error reading the Secret is retried (an outage of the hub heals);
// it names the Secret and is not permanent; a refusal (forbidden) says so.
func TestKubeconfigSecretAPIErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
	}{
		{"server error", apierrors.NewInternalError(errors.New("etcd is down")), false},
		{"timeout", apierrors.NewServerTimeout(schema.GroupResource{Resource: "secrets"}, "get", 1), false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "wl-kubeconfig", errors.New("RBAC")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hub := fake.NewClientset()
			hub.PrependReactor("get", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			_, err := KubeconfigSecret(hub.CoreV1(), "capi", "wl-kubeconfig", "value")(context.Background())
			var perm *login.PermanentError
			if err == nil || errors.As(err, &perm) != tc.permanent || !strings.Contains(err.Error(), `Secret capi/wl-kubeconfig key "value"`) {
				t.Errorf("got %v", err)
			}
		})
	}
	if _, err := KubeconfigSecretFrom(KubeconfigSecretConfig{Namespace: "capi", Name: "x"})(context.Background()); err == nil || !strings.Contains(err.Error(), "needs a Client") {
		t.Errorf("no client: %v", err)
	}
}

// The YAML parser quotes what it chokes on, in the form it parsed: a
// password cut by colons into words too short to look secret, or a token
// written with YAML escapes, is not the text of the Secret, and must not
// reach the error either.
func TestKubeconfigSecretParseErrorsQuoteNoContent(t *testing.T) {
	for _, tc := range []struct{ name, data, secret string }{
		{"password of short words", "users:\n- name: u\n  user: {{password: \"ab:cd:ef:gh:ij\"}: y}\n", "ab:cd:ef:gh:ij"},
		{"escaped token", "users:\n- name: u\n  user: {{token: \"tok\\u00e9n-s3cret\\\\xyz\"}: y}\n", "s3cret"},
		{"unknown anchor", "users:\n- name: u\n  user: {token: *s3cretanchor}\n", "s3cretanchor"},
		{"binary tag", "users:\n- name: u\n  user: {token: !!binary s3cr:et!}\n", "s3cr:et"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hub := hubWith(map[string][]byte{"value": []byte(tc.data)})
			_, err := KubeconfigSecret(hub.CoreV1(), "capi", "wl-kubeconfig", "value")(context.Background())
			if err == nil || !strings.Contains(err.Error(), "not a valid kubeconfig") {
				t.Fatalf("got %v, want a parse error", err)
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("error repeats %q: %v", tc.secret, err)
			}
		})
	}
}

// A Secret's kubeconfig whose token is a JWT expires at its exp, so that
// the vault reads the Secret again before then; an opaque token never
// expires.
func TestKubeconfigSecretJWTExpires(t *testing.T) {
	exp := time.Date(2030, 1, 1, 13, 0, 0, 0, time.UTC)
	for token, want := range map[string]time.Time{
		jwt(fmt.Sprintf(`{"sub":"robot","exp":%d}`, exp.Unix())): exp,
		jwt(`{"sub":"robot","exp":"soon"}`):                      {},
		secretToken:                                              {},
	} {
		hub := hubWith(map[string][]byte{"value": []byte(secretKubeconfig("https://wl.example:6443", "", fmt.Sprintf("{token: %q}", token)))})
		info, err := KubeconfigSecret(hub.CoreV1(), "capi", "wl-kubeconfig", ClusterAPIKey)(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.Token != token || !info.Expiration.Equal(want) {
			t.Errorf("credential expiring %v, want %v", info.Expiration, want)
		}
	}
}
