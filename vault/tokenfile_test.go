package vault

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
)

// A token file that the kubelet rotates is picked up within a minute of
// (fake) time, in the background: no caller waits, none sees the old token
// after the reread.
func TestTokenFileRotationIsPickedUpWithoutWaiting(t *testing.T) {
	v, clk := testVault(t, Options{})
	path := filepath.Join(t.TempDir(), "token")
	write := func(tok string) {
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first")
	v.OnLogin(handlers.TokenFile(path, login.ConnectionInfo{Server: "https://kubernetes.default.svc"}), login.ID("sa"))
	if c := mustSelect(t, v); c.Info.Token != "first" {
		t.Fatalf("Select() = %v, want the first token", c)
	}
	waitedBefore := v.waits.waited.Load()

	write("second") // the kubelet rotates the projected token
	rotatedAt := clk.Now()
	for clk.Since(rotatedAt) <= time.Minute {
		clk.Step(5 * time.Second)
		eventually(t, "a settled vault", func() bool { return clk.Waiters() == 2 && idle(v) })
		if mustSelect(t, v).Info.Token == "second" {
			break
		}
	}
	if got := mustSelect(t, v).Info.Token; got != "second" {
		t.Fatalf("a minute after the rotation Select() gives %q, want the new token", got)
	}
	if got := v.waits.waited.Load() - waitedBefore; got != 0 {
		t.Errorf("%d callers waited for the reread, want none", got)
	}
}
