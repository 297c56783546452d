package aks_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/hubtrust"
)

// Failures that are not the hub token's: an application Entra ID does
// not know (permanent, not ErrRejected); a 503, then Entra ID unreachable
// (retried by the vault, not ErrRejected).
func testFederatedFailures(t *testing.T, hub *hubtrust.Hub) {
	noRetries := func(o *aks.FederatedOptions) { o.CredentialOptions.Retry.MaxRetries = -1 }
	quick := []login.Option{login.Backoff(50*time.Millisecond, 100*time.Millisecond)}

	t.Run("unknown application", func(t *testing.T) {
		fv := startFed(t, hub, fedSetup{opts: func(o *aks.FederatedOptions) { o.ClientID = "0b1f6d3e-another-app" }})
		err := fv.selectErr(t, ctxFor(t, time.Minute))
		t.Log(err)
		var permanent *login.PermanentError
		if errors.Is(err, federation.ErrRejected) || !errors.As(err, &permanent) || !strings.Contains(err.Error(), "AADSTS700016") {
			t.Errorf("got %v, want a permanent error naming AADSTS700016, not federation.ErrRejected", err)
		}
	})

	t.Run("503", func(t *testing.T) {
		fv := startFed(t, hub, fedSetup{opts: noRetries, login: quick})
		fv.e.fed.unavailable.Store(2)
		ctx := ctxFor(t, time.Minute)
		for {
			_, err := fv.v.Select(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("Select: %v, want a credential once Entra ID answers", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		errs := fv.errors()
		if len(errs) != 2 {
			t.Fatalf("%d failed logins (%v), want 2", len(errs), errs)
		}
		for _, err := range errs {
			var permanent *login.PermanentError
			if errors.Is(err, federation.ErrRejected) || errors.As(err, &permanent) || !strings.Contains(err.Error(), "HTTP 503") {
				t.Errorf("got %v, want a retried error naming HTTP 503", err)
			}
		}
	})

	t.Run("Entra ID down", func(t *testing.T) {
		down := httptest.NewTLSServer(http.NotFoundHandler())
		down.Close() // its port refuses connections
		fv := startFed(t, hub, fedSetup{opts: func(o *aks.FederatedOptions) {
			noRetries(o)
			o.CredentialOptions.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: down.URL + "/"}
		}, login: append(quick, login.Retries(2))})
		ctx := ctxFor(t, time.Minute)
		for fv.logins.Load() < 3 && ctx.Err() == nil {
			_, _ = fv.v.Select(ctx)
			time.Sleep(20 * time.Millisecond)
		}
		errs := fv.errors()
		if n := fv.logins.Load(); n < 3 || len(errs) < 3 {
			t.Fatalf("%d logins, %d errors, want 3 of each (a try and 2 retries)", n, len(errs))
		}
		for _, err := range errs {
			var permanent *login.PermanentError
			if errors.Is(err, federation.ErrRejected) || errors.As(err, &permanent) {
				t.Errorf("got %v, want a plain error: the vault retries", err)
			}
		}
	})
}

// An endpoint that quotes the request (the hub's token) in its answer: no
// error holds it (fedVault's cleanup checks every error and the log).
func testFederatedEcho(t *testing.T, hub *hubtrust.Hub) {
	fv := startFed(t, hub, fedSetup{})
	fv.e.echo.Store(true)
	err := fv.selectErr(t, ctxFor(t, time.Minute))
	if !strings.Contains(err.Error(), "AADSTS7000215") || !strings.Contains(err.Error(), "aks: ") {
		t.Errorf("got %v, want aks's error naming AADSTS7000215", err)
	}
	if _, rejected, _ := fv.auth.Counts(); rejected == 0 {
		t.Errorf("the hub's webhook saw no token: the secrets' check would have none to look for")
	}
}
