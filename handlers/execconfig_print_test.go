package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/authvault/authvault/redact"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// secretExecConfig is an ExecConfig with a secret in every field that may
// hold one, and the secrets.
func secretExecConfig() (ExecConfig, []string) {
	stderr := bytes.NewBufferString("stderr-buffer-secret")
	cfg := ExecConfig{
		ExecConfig: clientcmdapi.ExecConfig{
			Command:    "aws",
			Args:       []string{"eks", "get-token", "--token=arg-secret-1"},
			APIVersion: execV1,
			Env: []clientcmdapi.ExecEnvVar{
				{Name: "AWS_SECRET_ACCESS_KEY", Value: "env-secret-1"},
				{Name: "AWS_SESSION_TOKEN", Value: "env-secret-2"},
				{Name: "EMPTY_ONE", Value: ""},
			},
			Config:          &runtime.Unknown{Raw: []byte(`{"audience":"config-secret-1"}`), ContentType: runtime.ContentTypeJSON},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			InstallHint:     "install the AWS CLI",
		},
		Cluster: login.ConnectionInfo{
			Server: "https://api.example:6443", Token: "cluster-token-secret",
			Password: "cluster-password-secret", Username: "admin",
			PrivateKeyData: []byte("cluster-key-secret"),
		},
		Stdin:  os.Stdin,
		Stderr: stderr,
	}
	return cfg, []string{
		"env-secret-1", "env-secret-2", "arg-secret-1", "config-secret-1", "audience",
		"cluster-token-secret", "cluster-password-secret", "cluster-key-secret", "stderr-buffer-secret",
	}
}

// Every printed form of an ExecConfig redacts env values, args, the
// cluster's extension config and the cluster's credentials; names stay.
func TestExecConfigPrintsRedacted(t *testing.T) {
	cfg, secrets := secretExecConfig()
	jsonOf := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			return "json error: " + err.Error()
		}
		return string(b)
	}
	var logged strings.Builder
	log := funcr.NewJSON(func(obj string) { logged.WriteString(obj) }, funcr.Options{})
	log.Info("exec", "config", cfg, "pointer", &cfg)

	type holder struct{ Exec ExecConfig }
	forms := map[string]string{
		"String()":             cfg.String(),
		"GoString()":           cfg.GoString(),
		"%v":                   fmt.Sprintf("%v", cfg),
		"%+v":                  fmt.Sprintf("%+v", cfg),
		"%#v":                  fmt.Sprintf("%#v", cfg),
		"%s":                   fmt.Sprintf("%s", cfg),
		"%q":                   fmt.Sprintf("%q", cfg),
		"%x":                   fmt.Sprintf("%x", cfg),
		"%v pointer":           fmt.Sprintf("%v", &cfg),
		"%+v pointer":          fmt.Sprintf("%+v", &cfg),
		"%#v pointer":          fmt.Sprintf("%#v", &cfg),
		"%+v in a struct":      fmt.Sprintf("%+v", holder{cfg}),
		"%#v in a struct":      fmt.Sprintf("%#v", holder{cfg}),
		"%v in a slice":        fmt.Sprintf("%v", []ExecConfig{cfg}),
		"Sprint":               fmt.Sprint(cfg),
		"JSON":                 jsonOf(cfg),
		"JSON pointer":         jsonOf(&cfg),
		"JSON in a struct":     jsonOf(holder{cfg}),
		"JSON MarshalIndent":   func() string { b, _ := json.MarshalIndent(cfg, "", " "); return string(b) }(),
		"logr (funcr)":         logged.String(),
		"MarshalLog() printed": fmt.Sprintf("%+v", cfg.MarshalLog()),
		"MarshalLog() JSON":    jsonOf(cfg.MarshalLog()),
	}
	for form, s := range forms {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("%s shows %q: %s", form, secret, s)
			}
		}
		if form == "%x" {
			continue
		}
		for _, want := range []string{"aws", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "EMPTY_ONE", "api.example:6443", execV1} {
			if !strings.Contains(s, want) {
				t.Errorf("%s = %s, want it to show %q", form, s, want)
			}
		}
	}
}

// An ExecConfig without secrets prints without redaction marks where there
// is nothing to hide, and its JSON keeps the kubeconfig's field names.
func TestExecConfigPrintsWhatItHas(t *testing.T) {
	cfg := ExecConfig{ExecConfig: clientcmdapi.ExecConfig{
		Command: "kubelogin", APIVersion: execV1beta1,
		Env: []clientcmdapi.ExecEnvVar{{Name: "EMPTY", Value: ""}},
	}}
	s := cfg.String()
	if strings.Contains(s, redact.Marker) || !strings.Contains(s, `Command: "kubelogin"`) || !strings.Contains(s, "EMPTY=") {
		t.Errorf("String() = %s, want the command, the empty env var and nothing redacted", s)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["command"] != "kubelogin" || got["apiVersion"] != execV1beta1 {
		t.Errorf("JSON = %s, want command and apiVersion", b)
	}
}

// ProvideResponse shows in every printed form, as the other fields do.
func TestExecConfigPrintsProvideResponse(t *testing.T) {
	cfg := ExecConfig{ExecConfig: clientcmdapi.ExecConfig{Command: "kubelogin", APIVersion: execV1}, ProvideResponse: true}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logged, err := json.Marshal(cfg.MarshalLog())
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]struct{ got, want string }{
		"String()":     {cfg.String(), "ProvideResponse: true"},
		"%+v":          {fmt.Sprintf("%+v", cfg), "ProvideResponse: true"},
		"JSON":         {string(b), `"provideResponse":true`},
		"MarshalLog()": {string(logged), `"provideResponse":true`},
	}
	for form, f := range forms {
		if !strings.Contains(f.got, f.want) {
			t.Errorf("%s = %s, want %s", form, f.got, f.want)
		}
	}
	cfg.ProvideResponse = false
	if s := cfg.String(); strings.Contains(s, "ProvideResponse") {
		t.Errorf("String() = %s with ProvideResponse off, want it left out as other unset fields are", s)
	}
}
