package handlers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// fakeCloud is a native login for a plugin named fake-cloud, run as
// "fake-cloud get-token --cluster NAME"; it records what it was asked.
type fakeCloud struct {
	mu       sync.Mutex
	requests []NativeRequest
	calls    int
}

func (f *fakeCloud) native() Native {
	return Native{
		Name: "fake",
		Serves: func(exec clientcmdapi.ExecConfig) bool {
			return filepath.Base(exec.Command) == "fake-cloud" && len(exec.Args) > 0 && exec.Args[0] == "get-token"
		},
		Handler: func(req NativeRequest) (login.Handler, error) {
			f.mu.Lock()
			f.requests = append(f.requests, req)
			f.mu.Unlock()
			args := req.Exec.Args[1:]
			if len(args) != 2 || args[0] != "--cluster" {
				return nil, fmt.Errorf("fake: arguments %q are not --cluster NAME", args)
			}
			return func(context.Context) (*login.ConnectionInfo, error) {
				f.mu.Lock()
				f.calls++
				f.mu.Unlock()
				return &login.ConnectionInfo{Token: "native-" + args[1], Expiration: time.Now().Add(time.Hour)}, nil
			}, nil
		},
	}
}

// useNative registers natives for one test.
func useNative(t *testing.T, natives ...Native) {
	t.Helper()
	UseNative(natives...)
	t.Cleanup(func() {
		nativeLogins.Lock()
		nativeLogins.list = nil
		nativeLogins.Unlock()
	})
}

// fakeCloudPlugin is a fake-cloud plugin that would touch marker if run.
func fakeCloudPlugin(t *testing.T, marker string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-cloud")
	script := "#!/bin/sh\ntouch " + marker + "\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-plugin\"}}'\n"
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// A kubeconfig file's plugin (no policy, or AllowAll) is served by the
// native login: the plugin does not run, the token is the native's, the
// server and CA are the kubeconfig's.
func TestNativeServesAPluginItRecognizes(t *testing.T) {
	cloud := &fakeCloud{}
	useNative(t, cloud.native())
	marker := filepath.Join(t.TempDir(), "ran")
	cluster := login.ConnectionInfo{Server: "https://c.example", CAData: testpki.NewCA(t).PEM}
	for _, policy := range []PluginPolicy{{}, AllowAll} {
		info, err := Exec(ExecConfig{ExecConfig: clientcmdapi.ExecConfig{
			Command: fakeCloudPlugin(t, marker), Args: []string{"get-token", "--cluster", "prod"},
			APIVersion: "client.authentication.k8s.io/v1", PluginPolicy: policy,
		}, Cluster: cluster})(context.Background())
		if err != nil {
			t.Fatalf("policy %q: %v", policy.PolicyType, err)
		}
		if info.Token != "native-prod" || info.Server != "https://c.example" || string(info.CAData) != string(cluster.CAData) || info.Expiration.IsZero() {
			t.Errorf("policy %q: %v, want the native token with the kubeconfig's server and CA, and an expiry", policy.PolicyType, info)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the plugin ran")
	}
	if len(cloud.requests) != 2 || cloud.requests[0].Untrusted || cloud.requests[0].Cluster.Server != "https://c.example" {
		t.Errorf("requests = %+v, want two trusted ones for the kubeconfig's server", cloud.requests)
	}
}

// A Secret's kubeconfig (DenyAll by default) may not use a native login
// unless its policy names it: the refusal names the plugin, the login and
// the policy, and neither the plugin nor the native login runs. Allowed,
// the request is marked untrusted.
func TestNativeFromASecretNeedsItsPolicy(t *testing.T) {
	cloud := &fakeCloud{}
	useNative(t, cloud.native())
	marker := filepath.Join(t.TempDir(), "ran")
	user := fmt.Sprintf("{exec: {apiVersion: client.authentication.k8s.io/v1, command: %q, args: [get-token, --cluster, prod], interactiveMode: Never}}",
		fakeCloudPlugin(t, marker))
	hub := hubWith(map[string][]byte{"value": []byte(secretKubeconfig("https://wl.example:6443", base64.StdEncoding.EncodeToString(testpki.NewCA(t).PEM), user))})

	for _, policy := range []PluginPolicy{{}, DenyAll, Allowlist("sh")} {
		_, err := KubeconfigSecretFrom(KubeconfigSecretConfig{Client: hub.CoreV1(), Namespace: "capi", Name: "wl-kubeconfig", PluginPolicy: policy})(context.Background())
		var perm *login.PermanentError
		if !errors.As(err, &perm) || !strings.Contains(fmt.Sprint(err), "would log in with the native fake login, which plugin policy") ||
			!strings.Contains(fmt.Sprint(err), "handlers.AllowNative") {
			t.Errorf("policy %q: %v, want a permanent error naming the native login and AllowNative", policy.PolicyType, err)
		}
	}
	if cloud.calls != 0 || len(cloud.requests) != 0 {
		t.Fatalf("the native login was asked %d times, called %d times, without its policy", len(cloud.requests), cloud.calls)
	}

	for _, policy := range []PluginPolicy{AllowNative(DenyAll, "fake"), AllowNative(Allowlist("sh"), "other", "fake")} {
		info, err := KubeconfigSecretFrom(KubeconfigSecretConfig{Client: hub.CoreV1(), Namespace: "capi", Name: "wl-kubeconfig", PluginPolicy: policy})(context.Background())
		if err != nil || info.Token != "native-prod" || info.Server != "https://wl.example:6443" {
			t.Fatalf("policy %+v: %v, %v", policy, info, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the plugin ran")
	}
	for _, r := range cloud.requests {
		if !r.Untrusted {
			t.Error("a Secret's kubeconfig was not marked untrusted")
		}
	}
}

// A parameter the native login does not understand is a permanent error
// naming the plugin and the login, never ignored; the plugin does not run
// in its place.
func TestNativeRefusesWhatItDoesNotUnderstand(t *testing.T) {
	cloud := &fakeCloud{}
	useNative(t, cloud.native())
	marker := filepath.Join(t.TempDir(), "ran")
	_, err := Exec(ExecConfig{ExecConfig: clientcmdapi.ExecConfig{
		Command: fakeCloudPlugin(t, marker), Args: []string{"get-token", "--cluster", "prod", "--profile", "x"},
		APIVersion: "client.authentication.k8s.io/v1",
	}, Cluster: login.ConnectionInfo{Server: "https://c.example"}})(context.Background())
	var perm *login.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), "served by the native fake login: fake: arguments") {
		t.Errorf("error = %v, want a permanent error naming the native login and its refusal", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the plugin ran in the native login's place")
	}
}

// A plugin no native login recognizes runs as before; AllowNative leaves
// AllowAll alone, turns DenyAll into an allowlist of the natives only, and
// adds to an allowlist without changing the caller's.
func TestNativeLeavesOtherPluginsAndPolicies(t *testing.T) {
	cloud := &fakeCloud{}
	useNative(t, cloud.native())
	marker := filepath.Join(t.TempDir(), "ran")
	info, err := Exec(ExecConfig{ExecConfig: clientcmdapi.ExecConfig{
		Command: fakeCloudPlugin(t, marker), Args: []string{"other-mode"}, APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}})(context.Background())
	if err != nil || info.Token != "from-plugin" {
		t.Fatalf("an unrecognized mode: %v, %v, want the plugin's token", info, err)
	}

	if p := AllowNative(AllowAll, "fake"); p.PolicyType != clientcmdapi.PluginPolicyAllowAll || len(p.Allowlist) != 0 {
		t.Errorf("AllowNative(AllowAll) = %+v", p)
	}
	if p := AllowNative(DenyAll, "fake"); p.PolicyType != clientcmdapi.PluginPolicyAllowlist || len(p.Allowlist) != 1 {
		t.Errorf("AllowNative(DenyAll) = %+v, want an allowlist of the native alone", p)
	}
	base := Allowlist("sh")
	p := AllowNative(base, "fake")
	if len(base.Allowlist) != 1 || len(p.Allowlist) != 2 {
		t.Errorf("AllowNative(Allowlist(sh)) = %+v, and the caller's became %+v", p, base)
	}
	// The native's entry runs no command of that name.
	if err := policyAllows(AllowNative(DenyAll, "fake"), "native:fake"); err == nil {
		t.Error(`the allowlist entry "native:fake" lets a command of that name run`)
	}
}

// A native login that says where its credential goes (the cloud's endpoint
// and CA, for a kubeconfig from elsewhere) wins over the kubeconfig, whose
// insecure-skip-tls-verify then no longer applies.
func TestNativeEndpointWinsOverTheKubeconfig(t *testing.T) {
	ca := testpki.NewCA(t).PEM
	useNative(t, Native{
		Name:   "pinned",
		Serves: func(exec clientcmdapi.ExecConfig) bool { return exec.Command == "pinned-cloud" },
		Handler: func(NativeRequest) (login.Handler, error) {
			return func(context.Context) (*login.ConnectionInfo, error) {
				return &login.ConnectionInfo{Server: "https://real.example", CAData: ca, Token: "t"}, nil
			}, nil
		},
	})
	info, err := Exec(ExecConfig{ExecConfig: clientcmdapi.ExecConfig{APIVersion: execV1, Command: "pinned-cloud"},
		Cluster: login.ConnectionInfo{Server: "https://chosen.example", Insecure: true, ProxyURL: "http://proxy.example"}})(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Server != "https://real.example" || string(info.CAData) != string(ca) || info.Insecure || info.ProxyURL != "http://proxy.example" {
		t.Errorf("got %v, want the login's server and CA, verified, through the kubeconfig's proxy", info)
	}
}

// A native login refuses an exec section that the plugin path would
// refuse for its apiVersion: a kubeconfig that works natively works when
// the plugin runs, and the other way round.
func TestNativeRefusesAnUnknownAPIVersion(t *testing.T) {
	cloud := &fakeCloud{}
	useNative(t, cloud.native())
	for _, v := range []string{"", "client.authentication.k8s.io/v1alpha1"} {
		_, err := Exec(ExecConfig{ExecConfig: clientcmdapi.ExecConfig{APIVersion: v, Command: "fake-cloud", Args: []string{"get-token", "--cluster", "prod"}},
			Cluster: login.ConnectionInfo{Server: "https://c.example"}})(context.Background())
		var perm *login.PermanentError
		if !errors.As(err, &perm) || !strings.Contains(err.Error(), "is not supported") {
			t.Errorf("apiVersion %q: %v, want a permanent error", v, err)
		}
	}
	if cloud.calls != 0 || len(cloud.requests) != 0 {
		t.Errorf("the native login was asked %d times", len(cloud.requests))
	}
}
