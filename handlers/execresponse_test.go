package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

const testChallenge = `Bearer realm="authvault-test", error="invalid_token"`

// runWithInfo runs cfg under ctx and returns the KUBERNETES_EXEC_INFO the
// plugin got, as it came.
func runWithInfo(t *testing.T, ctx context.Context, cfg ExecConfig) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "info")
	cfg.Env = append(append([]clientcmdapi.ExecEnvVar(nil), cfg.Env...), clientcmdapi.ExecEnvVar{Name: "PLUGIN_INFO_FILE", Value: path})
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := Exec(cfg)(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// With ProvideResponse, a login that follows a rejection tells the plugin
// the response in spec.response: its code and its WWW-Authenticate header,
// nothing else. Any other login, a rejection without the response, or the
// option off: no spec.response.
func TestExecProvideResponse(t *testing.T) {
	rejected := login.Reason{Kind: login.Rejected, StatusCode: 401, Challenge: testChallenge}
	tests := []struct {
		name    string
		provide bool
		reason  *login.Reason // nil: ctx carries none
		want    string        // the exact spec.response, "" for none
	}{
		{"rejected", true, &rejected,
			`"response":{"code":401,"header":{"WWW-Authenticate":["Bearer realm=\"authvault-test\", error=\"invalid_token\""]}}`},
		{"rejected without a challenge", true, &login.Reason{Kind: login.Rejected, StatusCode: 401}, `"response":{"code":401}`},
		{"option off", false, &rejected, ""},
		{"rejected without the response", true, &login.Reason{Kind: login.Rejected}, ""},
		{"refresh", true, &login.Reason{Kind: login.Refresh}, ""},
		{"first login", true, &login.Reason{Kind: login.FirstLogin}, ""},
		{"expired", true, &login.Reason{Kind: login.Expired}, ""},
		{"no reason", true, nil, ""},
	}
	for _, version := range []string{execV1, execV1beta1} {
		for _, tt := range tests {
			t.Run(version+"/"+tt.name, func(t *testing.T) {
				cfg, _ := plugin(t, "token")
				cfg.APIVersion = version
				cfg.ProvideResponse = tt.provide
				ctx := context.Background()
				if tt.reason != nil {
					ctx = login.WithReason(ctx, *tt.reason)
				}
				raw := runWithInfo(t, ctx, cfg)
				info := decodeInfo(t, raw)
				spec, _ := info["spec"].(map[string]any)
				if info["apiVersion"] != version || info["kind"] != "ExecCredential" || spec == nil {
					t.Fatalf("KUBERNETES_EXEC_INFO = %s, want a %s ExecCredential with a spec", raw, version)
				}
				if tt.want == "" {
					if _, ok := spec["response"]; ok || strings.Contains(raw, "response") {
						t.Errorf("KUBERNETES_EXEC_INFO = %s, want no response", raw)
					}
					return
				}
				if !strings.Contains(raw, tt.want) {
					t.Errorf("KUBERNETES_EXEC_INFO = %s, want it to hold %s", raw, tt.want)
				}
				var want map[string]any
				if err := json.Unmarshal([]byte("{"+tt.want+"}"), &want); err != nil {
					t.Fatal(err)
				}
				if got := spec["response"]; !reflect.DeepEqual(got, want["response"]) {
					t.Errorf("spec.response = %v, want exactly %v", got, want["response"])
				}
			})
		}
	}
}

// spec.response is no field of client.authentication.k8s.io v1 or v1beta1:
// lenient decoders (client-go's scheme, encoding/json) skip it, strict ones
// refuse it. That is why ProvideResponse is off by default.
func TestExecResponseIsUnknownToStrictDecoders(t *testing.T) {
	for _, version := range []string{execV1, execV1beta1} {
		cfg, _ := plugin(t, "token")
		cfg.APIVersion = version
		cfg.ProvideResponse = true
		raw := runWithInfo(t, login.WithReason(context.Background(), login.Reason{Kind: login.Rejected, StatusCode: 401, Challenge: testChallenge}), cfg)
		var into any = &clientauthv1.ExecCredential{}
		if version == execV1beta1 {
			into = &clientauthv1beta1.ExecCredential{}
		}
		if err := json.Unmarshal([]byte(raw), into); err != nil {
			t.Errorf("%s: a lenient decoder refuses %s: %v", version, raw, err)
		}
		strict := json.NewDecoder(bytes.NewReader([]byte(raw)))
		strict.DisallowUnknownFields()
		if err := strict.Decode(into); err == nil || !strings.Contains(err.Error(), "response") {
			t.Errorf("%s: a strict decoder of %s: error %v, want the unknown field response", version, raw, err)
		}
	}
}
