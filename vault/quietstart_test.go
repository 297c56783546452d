package vault

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// A start on the kubeconfig (addon-proxy's, the fleet's hub's: a vault with
// no handler of its own, the fallbacks as they ship) says so in one INFO
// line: which kubeconfig, which context, which server. The fallbacks it
// tried, and the kubeconfig's own login, are at V(1). Before, it took five
// INFO lines: "logging in" for each of three fallbacks, "logged in", and
// "using a fallback".
func TestAStartOnTheKubeconfigIsOneInfoLine(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	writeKubeconfig(t, kubeconfig, "hub-token")
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")

	var logs testlog.Buffer
	v := New(Options{Logger: logs.Logger(1)})
	defer v.Close()
	mustSelect(t, v)
	eventually(t, "the fallbacks' logins to end", func() bool { return idle(v) && len(logLines(&logs, "login gave no credential")) == 2 })

	if strings.Contains(logs.String(), "hub-token") {
		t.Errorf("the token in the log:\n%s", logs.String())
	}
	var info []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if !strings.Contains(line, `"level"=1`) {
			info = append(info, line)
		}
	}
	if len(info) != 1 {
		t.Fatalf("%d INFO lines at the start, want 1:\n%s", len(info), strings.Join(info, "\n"))
	}
	for _, want := range []string{`"handler"="kubeconfig from --kubeconfig or $KUBECONFIG"`, `"server"="https://api.example:6443"`,
		`"from"="kubeconfig ` + kubeconfig + `, context \"c\""`, `"fingerprint"=`} {
		if !strings.Contains(info[0], want) {
			t.Errorf("the start's line lacks %s: %s", want, info[0])
		}
	}
	for msg, want := range map[string]int{"logging in": 3, "logged in": 1} {
		if got := len(logLines(&logs, msg)); got != want {
			t.Errorf("%d lines %q at V(1), want %d:\n%s", got, msg, want, logs.String())
		}
	}
}

// What follows the start is news as before: a revocation of the
// kubeconfig's credential, and the login after it, are at INFO.
func TestARevokedKubeconfigIsNews(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	writeKubeconfig(t, kubeconfig, "hub-token")
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")

	var logs testlog.Buffer
	v := New(Options{Logger: logs.Logger(0)})
	defer v.Close()
	c := mustSelect(t, v)
	eventually(t, "the fallbacks' logins to end", func() bool { return idle(v) })
	writeKubeconfig(t, kubeconfig, "new-token")
	v.served(c)
	reject(v, c)
	// After the login floor, a second of the vault's real clock.
	eventually(t, "the re-login", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), testwait.Hang)
		defer cancel()
		got, err := v.Select(ctx)
		return err == nil && got != c
	})
	for _, tc := range []struct{ msg, with string }{
		{"credential invalidated", `"handler"="kubeconfig from --kubeconfig or $KUBECONFIG"`},
		{"logging in", `"reason"="rejected by the server (401)"`},
		{"logged in", `"reason"="rejected by the server (401)"`},
	} {
		n := 0
		for _, line := range logLines(&logs, tc.msg) {
			if strings.Contains(line, tc.with) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d INFO lines %q with %s, want 1:\n%s", n, tc.msg, tc.with, logs.String())
		}
	}
}
