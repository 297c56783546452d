package vault

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
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
		settled(t, v, clk)
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

// A token file is read again every RereadAfter, not at a fraction of an
// expiration made up to force it; a token that does not change says so at
// V(1) only, and does not expire.
func TestTokenFileIsReadAgainAtItsPace(t *testing.T) {
	var logs testlog.Buffer
	v, clk := testVault(t, Options{Logger: logs.Logger(0)})
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("opaque\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	tokenFile := handlers.TokenFile(path, login.ConnectionInfo{Server: "https://kubernetes.default.svc"})
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		reads.Add(1)
		return tokenFile(ctx)
	}, login.ID("sa"))
	if c := mustSelect(t, v); !c.Info.Expiration.IsZero() {
		t.Errorf("an opaque token expiring %v, want never", c.Info.Expiration)
	}
	settled(t, v, clk)
	for range 5 * 60 {
		clk.Step(time.Second)
		settled(t, v, clk)
	}
	if got, want := reads.Load(), int64(1+5*time.Minute/handlers.RereadAfter); got != want {
		t.Errorf("the file was read %d times in 5 min, want %d: every %v", got, want, handlers.RereadAfter)
	}
	if lines := logLines(&logs, "logged in"); len(lines) != 1 {
		t.Errorf("%d INFO lines \"logged in\", want the first login's only:\n%s", len(lines), logs.String())
	}
}
