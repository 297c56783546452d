package handlers

import (
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ExecCredential field names are case-sensitive, as client-go's decoder
// has them: "Token" is no token, "Status" no status, and a wrongly cased
// duplicate does not override the right one. client-go is run on the same
// output to prove it.
func TestExecCredentialFieldNamesAreCaseSensitive(t *testing.T) {
	const head = `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",`
	tests := []struct {
		name, output string
		wantToken    string // "" = the output is refused
	}{
		{"Token", head + `"status":{"token":"","Token":"wrong-case-token"}}`, ""},
		{"Status", head + `"Status":{"token":"wrong-case-token"}}`, ""},
		{"token then Token", head + `"status":{"token":"right-token","Token":"wrong-case-token"}}`, "right-token"},
		{"ExpirationTimestamp ignored", head + `"status":{"token":"right-token","ExpirationTimestamp":"not a time"}}`, "right-token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := clientcmdapi.ExecConfig{APIVersion: execV1, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
			cg := viaClientGo(t, newReplay(t, tt.output, 0).config(base), nil, nil, 1)
			if cg.token != tt.wantToken || (cg.err == nil) != (tt.wantToken != "") {
				t.Fatalf("client-go: token %q, error %v; the case expects token %q", cg.token, cg.err, tt.wantToken)
			}
			cfg := ExecConfig{ExecConfig: newReplay(t, tt.output, 0).config(base)}
			info, err := viaExec(t, cfg, nil)
			switch {
			case tt.wantToken == "" && err == nil:
				t.Errorf("Exec = %v, want an error as client-go's %v", info, cg.err)
			case tt.wantToken != "" && (err != nil || info.Token != tt.wantToken):
				t.Errorf("Exec = %v, %v; want token %q as client-go", info, err, tt.wantToken)
			}
			if err != nil && !isExecOutputError(err) {
				t.Errorf("error = %v, want it to say what the output lacks", err)
			}
		})
	}
}

// isExecOutputError tells an error about the plugin's output from one
// about running it.
func isExecOutputError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "output has") && strings.HasPrefix(s, "handlers: exec plugin") && !strings.Contains(s, "wrong-case-token")
}

// The cluster's disable-compression reaches the plugin, as client-go sends
// it, in both versions.
func TestExecInfoDisableCompression(t *testing.T) {
	for _, version := range []string{execV1, execV1beta1} {
		cfg, _ := plugin(t, "echo-info")
		cfg.APIVersion = version
		cfg.ProvideClusterInfo = true
		cfg.DisableCompression = true
		info, err := run(t, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := execInfoOf(t, info); !strings.Contains(got, `"disable-compression":true`) {
			t.Errorf("%s: KUBERNETES_EXEC_INFO = %s, want disable-compression", version, got)
		}
	}
}
