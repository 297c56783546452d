package handlers

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
)

// pinnedCloud is a native login that, like EKS's for a Secret, answers with
// the cloud's endpoint and CA; minted counts the tokens it made.
func pinnedCloud(t *testing.T, minted *atomic.Int32) Native {
	ca := testpki.NewCA(t).PEM
	return Native{
		Name:   "pinned",
		Serves: func(exec clientcmdapi.ExecConfig) bool { return exec.Command == "pinned-cloud" },
		Handler: func(NativeRequest) (login.Handler, error) {
			return func(context.Context) (*login.ConnectionInfo, error) {
				minted.Add(1)
				return &login.ConnectionInfo{Server: "https://real.example", CAData: ca, Token: "t"}, nil
			}, nil
		},
	}
}

// A kubeconfig from elsewhere served by a native login may not choose how
// the token reaches the cloud's endpoint: its tls-server-name would have
// the cloud's CA verify another name (a kubelet's, whose serving
// certificate the cluster's CA signed), its proxy-url would let a proxy of
// its choosing connect the token to a server of its choosing. Either is a
// permanent error before any token is made, that quotes no proxy password;
// a kubeconfig file (AllowAll) keeps both.
func TestNativeFromElsewhereTakesNoProxyNorServerName(t *testing.T) {
	var minted atomic.Int32
	useNative(t, pinnedCloud(t, &minted))
	untrusted := AllowNative(DenyAll, "pinned")
	for _, tt := range []struct {
		name    string
		cluster login.ConnectionInfo
		want    string
	}{
		{"tls-server-name", login.ConnectionInfo{Server: "https://real.example", TLSServerName: "ip-10-0-0-1.ec2.internal"}, "tls-server-name"},
		{"proxy-url", login.ConnectionInfo{Server: "https://real.example", ProxyURL: "http://user:pr0xy-pass@proxy.example"}, "proxy-url"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Exec(ExecConfig{ExecConfig: clientcmdapi.ExecConfig{APIVersion: execV1, Command: "pinned-cloud", PluginPolicy: untrusted},
				Cluster: tt.cluster})(context.Background())
			var perm *login.PermanentError
			if !errors.As(err, &perm) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "native pinned login") {
				t.Errorf("error = %v, want a permanent error naming %s and the native login", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "pr0xy-pass") {
				t.Errorf("the error quotes the proxy's password: %v", err)
			}
		})
	}
	if n := minted.Load(); n != 0 {
		t.Errorf("%d tokens made for a kubeconfig from elsewhere with its own proxy or server name", n)
	}

	info, err := Exec(ExecConfig{ExecConfig: clientcmdapi.ExecConfig{APIVersion: execV1, Command: "pinned-cloud", PluginPolicy: AllowAll},
		Cluster: login.ConnectionInfo{Server: "https://real.example", TLSServerName: "real.example", ProxyURL: "http://proxy.example"}})(context.Background())
	if err != nil || info.TLSServerName != "real.example" || info.ProxyURL != "http://proxy.example" {
		t.Errorf("a kubeconfig file: %v, %v; want its server name and proxy kept", info, err)
	}
}

// A native login from elsewhere gets no environment variable that would
// steer a plugin (kubeconf.PluginEnvAllowed), even when the native itself
// does not look at the environment: the same refusal as a plugin's, before
// the native is asked.
func TestNativeFromElsewhereChecksTheEnvironment(t *testing.T) {
	cloud := &fakeCloud{} // reads its arguments only
	useNative(t, cloud.native())
	_, err := Exec(ExecConfig{ExecConfig: clientcmdapi.ExecConfig{
		APIVersion: execV1, Command: "fake-cloud", Args: []string{"get-token", "--cluster", "prod"}, PluginPolicy: AllowNative(DenyAll, "fake"),
		Env: []clientcmdapi.ExecEnvVar{{Name: "AZURE_AUTHORITY_HOST", Value: "https://attacker.example"}},
	}, Cluster: login.ConnectionInfo{Server: "https://c.example"}})(context.Background())
	var perm *login.PermanentError
	if !errors.As(err, &perm) || !strings.Contains(err.Error(), `env "AZURE_AUTHORITY_HOST" is not allowed`) {
		t.Errorf("error = %v, want a permanent error naming the variable", err)
	}
	if err != nil && strings.Contains(err.Error(), "attacker.example") {
		t.Errorf("the error quotes the variable's value: %v", err)
	}
	if len(cloud.requests) != 0 {
		t.Errorf("the native login was asked %d times", len(cloud.requests))
	}
}
