package vault

import (
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/authvault/authvault/login"
)

// Ready is a controller-runtime readiness check.
var _ healthz.Checker = (*Vault)(nil).Ready

// A probe on a vault that has not logged in starts the login and is ready
// while it runs, for the grace; a login that takes longer is not ready, with
// the LoginError; the credential makes it ready.
func TestReadyDuringTheFirstLogin(t *testing.T) {
	v, clk := testVault(t, Options{ReadyGrace: time.Minute})
	h := &counter{block: make(chan struct{})}
	v.OnLogin(h.login, login.ID("slow"))
	if err := v.Ready(nil); err != nil {
		t.Fatalf("Ready() = %v while the first login starts, want nil", err)
	}
	eventually(t, "the probe to start the login", func() bool { return h.calls.Load() == 1 })
	clk.Step(59 * time.Second)
	if err := v.Ready(nil); err != nil {
		t.Errorf("Ready() = %v 59 s into the first login, want nil", err)
	}
	clk.Step(time.Second)
	var le *LoginError
	if err := v.Ready(nil); !errors.As(err, &le) {
		t.Errorf("Ready() = %v a minute into the first login, want a *LoginError", err)
	}
	close(h.block)
	eventually(t, "the credential", func() bool { return v.Ready(nil) == nil })
}

// After a login round failed, Ready gives the LoginError that names why.
func TestReadyAfterAFailedLogin(t *testing.T) {
	v, _ := testVault(t, Options{})
	boom := errors.New("secret store unreachable")
	h := &counter{}
	h.failWith(boom)
	v.OnLogin(h.login, login.ID("store"), login.Retries(0))
	_ = v.Ready(nil) // starts the login
	eventually(t, "the login to fail", func() bool { return idle(v) })
	err := v.Ready(nil)
	var le *LoginError
	if !errors.As(err, &le) || !errors.Is(err, boom) {
		t.Errorf("Ready() = %v, want a LoginError wrapping the handler's error", err)
	}
	v.Close()
	if err := v.Ready(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Ready() after Close = %v, want ErrClosed", err)
	}
}

// A credential that is revoked while others serve does not make the vault
// unready; when the last one goes, the re-login counts as ready again for
// its grace.
func TestReadyWhileCredentialsRotate(t *testing.T) {
	v, clk := testVault(t, Options{})
	h := &counter{}
	v.OnLogin(h.login, login.ID("rotating"))
	c := mustSelect(t, v)
	if err := v.Ready(nil); err != nil {
		t.Fatalf("Ready() = %v with a credential, want nil", err)
	}
	clk.Step(2 * time.Minute) // long after the first login
	h.block = make(chan struct{})
	_ = v.Invalidate(t.Context(), c, errors.New("401"))
	if err := v.Ready(nil); err != nil {
		t.Errorf("Ready() = %v while the re-login starts, want nil", err)
	}
	close(h.block)
}
