package handlers_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// A projected token whose JWT has expired (the kubelet stopped rotating it,
// or this node's clock runs ahead of the issuer's): a caller without a
// deadline (client-go's default) gets a LoginError saying it expired.
func TestExpiredJWTTokenFileFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	jwt := testpki.NewSigner(t).JWT(t, map[string]any{"exp": time.Now().Add(-time.Minute).Unix(), "sub": "system:serviceaccount:a:b"})
	if err := os.WriteFile(path, []byte(jwt), 0o600); err != nil {
		t.Fatal(err)
	}
	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(handlers.TokenFile(path, login.ConnectionInfo{Server: "https://api.example:6443"}), login.ID("sa"))
	done := make(chan error, 1)
	go func() {
		_, err := v.Select(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		var le *vault.LoginError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), `handler "sa": vault: the handler returned an expired credential`) {
			t.Errorf("Select() = %v, want a LoginError saying the handler's credential expired", err)
		}
	case <-time.After(testwait.Hang):
		t.Errorf("Select without a deadline still waits after %v on a token file whose JWT has expired", testwait.Hang)
		v.Close()
		<-done
	}
}

// A token with a C1 control character (U+0085) fails with an error naming
// the file, as one with an ASCII control does.
func TestTokenFileC1ControlErrorNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("abc\u0085def"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := handlers.TokenFile(path, login.ConnectionInfo{Server: "https://api.example:6443"})
	info, err := h(context.Background())
	if err == nil {
		t.Fatalf("TokenFile() = %v, want an error", info)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error = %q, want it to name the token file %s", err, path)
	}
}
