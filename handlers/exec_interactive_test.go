package handlers

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"golang.org/x/term"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/login"
)

// interactiveMode Always on a terminal that the kubeconfig says is
// unavailable fails as client-go's does: "standard input is unavailable",
// with the kubeconfig's message, and says nothing of a terminal that is
// there.
func TestExecAlwaysWithStdinUnavailable(t *testing.T) {
	tty := terminal(t)
	if !term.IsTerminal(int(tty.Fd())) {
		t.Fatal("the pseudo-terminal is not a terminal")
	}
	tests := []struct {
		message, want string
	}{
		{"", "standard input is unavailable"},
		{"run kubectl login first", "standard input is unavailable: run kubectl login first"},
	}
	for _, tt := range tests {
		cfg, _ := plugin(t, "token")
		cfg.Stdin = tty
		cfg.InteractiveMode = clientcmdapi.AlwaysExecInteractiveMode
		cfg.StdinUnavailable = true
		cfg.StdinUnavailableMessage = tt.message
		_, err := run(t, cfg)
		if err == nil || !strings.HasSuffix(err.Error(), tt.want) || strings.Contains(err.Error(), "terminal") {
			t.Errorf("message %q: error = %v, want it to end in %q", tt.message, err, tt.want)
		}
		var pe *login.PermanentError
		if !errors.As(err, &pe) {
			t.Errorf("message %q: error = %v, want a permanent one", tt.message, err)
		}
	}

	// Available, the terminal makes the plugin interactive.
	cfg, _ := plugin(t, "echo-info")
	cfg.Stdin = tty
	cfg.InteractiveMode = clientcmdapi.AlwaysExecInteractiveMode
	if info, err := run(t, cfg); err != nil || !strings.Contains(execInfoOf(t, info), `"interactive":true`) {
		t.Errorf("Always on a terminal: %v, %v; want an interactive plugin", info, err)
	}
}

// execInfoOf is the KUBERNETES_EXEC_INFO an echo-info plugin put in the
// credential's token.
func execInfoOf(t *testing.T, info *login.ConnectionInfo) string {
	t.Helper()
	if info == nil {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(info.Token)
	if err != nil {
		t.Fatalf("token of an echo-info plugin: %v", err)
	}
	return string(raw)
}
