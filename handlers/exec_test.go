package handlers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

const cluster = "https://api.example:6443"

// plugin is an ExecConfig for the test plugin in mode, with env added.
func plugin(t *testing.T, mode string, env ...string) (ExecConfig, *bytes.Buffer) {
	t.Helper()
	var stderr bytes.Buffer
	cfg := ExecConfig{
		ExecConfig: clientcmdapi.ExecConfig{
			Command:         pluginPath,
			APIVersion:      execV1,
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			Env:             []clientcmdapi.ExecEnvVar{{Name: "PLUGIN_MODE", Value: mode}},
		},
		Cluster: login.ConnectionInfo{Server: cluster, DefaultNamespace: "team-a", Token: "not-copied"},
		Stderr:  &stderr,
	}
	for i := 0; i+1 < len(env); i += 2 {
		cfg.Env = append(cfg.Env, clientcmdapi.ExecEnvVar{Name: env[i], Value: env[i+1]})
	}
	return cfg, &stderr
}

func run(t *testing.T, cfg ExecConfig) (*login.ConnectionInfo, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return Exec(cfg)(ctx)
}

func TestExecToken(t *testing.T) {
	for _, version := range []string{execV1, execV1beta1} {
		t.Run(version, func(t *testing.T) {
			cfg, _ := plugin(t, "token", "PLUGIN_TTL", "15m")
			cfg.APIVersion = version
			info, err := run(t, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if info.Token != "plugin-token-1" || info.Server != cluster || info.DefaultNamespace != "team-a" {
				t.Errorf("credential = %v, want the plugin's token on the cluster", info)
			}
			if left := time.Until(info.Expiration); left < 14*time.Minute || left > 16*time.Minute {
				t.Errorf("expiration in %v, want the plugin's 15m", left)
			}
		})
	}
}

func TestExecWithoutExpirationLivesUntilRejected(t *testing.T) {
	cfg, _ := plugin(t, "token")
	info, err := run(t, cfg)
	if err != nil || !info.Expiration.IsZero() {
		t.Errorf("credential = %v, %v; want one with no expiration", info, err)
	}
}

func TestExecClientCertificate(t *testing.T) {
	cert, key := testpki.KeyPair(t)
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	_ = os.WriteFile(certPath, cert, 0o600)
	_ = os.WriteFile(keyPath, key, 0o600)
	cfg, _ := plugin(t, "cert", "PLUGIN_CERT", certPath, "PLUGIN_KEY", keyPath)
	info, err := run(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(info.CertificateData, cert) || !bytes.Equal(info.PrivateKeyData, key) || info.Token != "" {
		t.Errorf("credential = %v, want the certificate and key and no token", info)
	}
	if err := info.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}

func TestExecInfo(t *testing.T) {
	ca := testpki.NewCA(t)
	cfg, _ := plugin(t, "echo-info")
	cfg.ProvideClusterInfo = true
	cfg.Cluster = login.ConnectionInfo{Server: cluster, CAData: ca.PEM, TLSServerName: "api", ProxyURL: "http://proxy:3128", Insecure: true}
	cfg.Config = &runtime.Unknown{Raw: []byte(`{"region":"eu-west-1"}`), ContentType: runtime.ContentTypeJSON}
	info, err := run(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(info.Token)
	var got clientauthv1.ExecCredential
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("KUBERNETES_EXEC_INFO %s: %v", raw, err)
	}
	c := got.Spec.Cluster
	if got.APIVersion != execV1 || got.Kind != "ExecCredential" || got.Spec.Interactive || c == nil {
		t.Fatalf("KUBERNETES_EXEC_INFO = %s, want a non-interactive v1 ExecCredential with the cluster", raw)
	}
	if c.Server != cluster || !bytes.Equal(c.CertificateAuthorityData, ca.PEM) || c.TLSServerName != "api" ||
		c.ProxyURL != "http://proxy:3128" || !c.InsecureSkipTLSVerify || string(c.Config.Raw) != `{"region":"eu-west-1"}` {
		t.Errorf("cluster = %+v (config %s), want the cluster's settings", c, c.Config.Raw)
	}

	cfg.ProvideClusterInfo = false
	info, _ = run(t, cfg)
	raw, _ = base64.StdEncoding.DecodeString(info.Token)
	if strings.Contains(string(raw), "cluster") {
		t.Errorf("KUBERNETES_EXEC_INFO = %s without provideClusterInfo, want no cluster", raw)
	}
}

func TestExecEnvAndShellScript(t *testing.T) {
	cfg, _ := plugin(t, "env", "PLUGIN_ENV_NAME", "MY_SETTING", "MY_SETTING", "from-config")
	if info, err := run(t, cfg); err != nil || info.Token != "from-config" {
		t.Errorf("credential = %v, %v; want the env the config adds", info, err)
	}
	t.Setenv("FROM_PROCESS", "inherited")
	cfg, _ = plugin(t, "env", "PLUGIN_ENV_NAME", "FROM_PROCESS")
	if info, err := run(t, cfg); err != nil || info.Token != "inherited" {
		t.Errorf("credential = %v, %v; want the process environment passed on", info, err)
	}
	script, _ := filepath.Abs("testdata/plugin.sh")
	cfg, _ = plugin(t, "")
	cfg.Command = script
	cfg.Env = []clientcmdapi.ExecEnvVar{{Name: "PLUGIN_SH_TOKEN", Value: "from-shell"}}
	if info, err := run(t, cfg); err != nil || info.Token != "from-shell" {
		t.Errorf("shell plugin credential = %v, %v", info, err)
	}
}

func TestExecStdinOnlyWhenInteractive(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.WriteString("typed by a user\n")
	w.Close()
	defer r.Close()
	cfg, _ := plugin(t, "stdin")
	cfg.Stdin = r
	cfg.InteractiveMode = clientcmdapi.IfAvailableExecInteractiveMode // a pipe is no terminal
	if info, err := run(t, cfg); err != nil || info.Token != "stdin:" {
		t.Errorf("credential = %v, %v; want a plugin that got no stdin", info, err)
	}
	cfg.InteractiveMode = clientcmdapi.AlwaysExecInteractiveMode
	if _, err := run(t, cfg); err == nil || !strings.Contains(err.Error(), "stdin is not a terminal") {
		t.Errorf("Always without a terminal: error = %v", err)
	}
}

func TestExecErrors(t *testing.T) {
	tests := []struct {
		name      string
		mode      string
		change    func(*ExecConfig)
		want      string
		permanent bool
	}{
		{"not found", "", func(c *ExecConfig) {
			c.Command = "no-such-plugin-xyz"
			c.InstallHint = "install it with: brew install xyz"
		},
			`exec plugin "no-such-plugin-xyz" not found: install it with: brew install xyz`, true},
		{"no command", "", func(c *ExecConfig) { c.Command = "" }, "exec plugin has no command", true},
		{"bad version", "", func(c *ExecConfig) { c.APIVersion = "client.authentication.k8s.io/v1alpha1" }, `apiVersion "client.authentication.k8s.io/v1alpha1" is not supported`, true},
		{"v1 without interactive mode", "", func(c *ExecConfig) { c.InteractiveMode = "" }, "interactiveMode must be set", true},
		{"bad interactive mode", "", func(c *ExecConfig) { c.InteractiveMode = "Sometimes" }, `interactiveMode "Sometimes"`, true},
		{"exit code", "fail", nil, "exited with code 3 (stderr went to ExecConfig.Stderr (*bytes.Buffer))", false},
		{"not json", "not-json", nil, "output is not a JSON object (syntax error at byte", false},
		{"wrong version", "wrong-version", nil, `output has apiVersion "client.authentication.k8s.io/v1alpha1", want "client.authentication.k8s.io/v1"`, false},
		{"wrong kind", "wrong-kind", nil, `output has kind "Secret", want "ExecCredential"`, false},
		{"no status", "no-status", nil, "output has no status", false},
		{"cert without key", "cert-without-key", nil, "client certificate without its key", false},
		{"empty status", "empty-status", nil, "neither a token nor a client certificate", false},
		{"huge output", "huge", nil, "wrote more than 1048576 bytes", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := plugin(t, tt.mode)
			if tt.change != nil {
				tt.change(&cfg)
			}
			_, err := run(t, cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "handlers: exec plugin") {
				t.Errorf("error = %q, want it to name the plugin", err)
			}
			var pe *login.PermanentError
			if got := errors.As(err, &pe); got != tt.permanent {
				t.Errorf("permanent = %v, want %v", got, tt.permanent)
			}
			for _, secret := range []string{"secret", "plugin-token"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q quotes the plugin's stdout", err)
				}
			}
		})
	}
}

func TestExecStderrGoesToTheOperator(t *testing.T) {
	cfg, stderr := plugin(t, "fail")
	_, _ = run(t, cfg)
	if !strings.Contains(stderr.String(), "the identity provider said no") {
		t.Errorf("stderr = %q, want the plugin's stderr", stderr)
	}
}

// A timeout kills the plugin and its children, and leaves no zombie.
func TestExecTimeoutKillsThePluginAndItsChildren(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	cfg, _ := plugin(t, "child", "PLUGIN_PIDFILE", pidfile)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Exec(cfg)(ctx)
	// Not killed, the plugin would sleep a minute: the bound is a hang's.
	if elapsed := time.Since(start); elapsed > testwait.Hang {
		t.Errorf("Exec returned after %v, want it soon after the timeout", elapsed)
	}
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("error = %v, want the plugin stopped by the deadline", err)
	}
	raw, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatalf("the plugin did not start its child: %v", err)
	}
	pid, _ := strconv.Atoi(string(raw))
	deadline := time.Now().Add(testwait.Hang)
	for {
		state := processState(pid)
		if state == "" {
			break // gone, reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin's child %d is still there in state %q", pid, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processState is the state letter of pid from /proc, or "" when it is gone.
func processState(pid int) string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) == 0 {
		return "?"
	}
	return fields[0]
}
