package vault

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
)

// credOfDigest is a credential told apart by the first byte of its digest.
func credOfDigest(b byte) *Credential {
	c := &Credential{Info: &login.ConnectionInfo{}}
	c.digest[0] = b
	return c
}

// A credential offered again after a server's 401 invalidated it carries
// that 401, and only that one: one the caller invalidated carries none,
// even when its cause was a 401; the 401s leave with their digests; the
// API server's 401 keeps its advice; the error reads as errInvalidated
// under every verb and counts as it did.
func TestAReofferedCredentialCarriesItsRejection(t *testing.T) {
	now := time.Now()
	noJitter := func(int64) int64 { return 0 }
	h := &handlerState{}
	service := &UnauthorizedError{Server: "https://svc.example", Status: "401 Unauthorized", StatusCode: 401,
		Challenge: `Bearer realm="greeter.example", error="invalid_token", error_description="its audience is another"`}
	apiServer := &UnauthorizedError{Server: "https://api.example", Status: "401 Unauthorized", StatusCode: 401}
	a, b, c, d := credOfDigest(1), credOfDigest(2), credOfDigest(3), credOfDigest(4)
	h.rejected(now, a, login.Reason{}, service, 2, true, noJitter)
	h.rejected(now, b, login.Reason{}, service, 2, false, noJitter) // by the caller, its cause a 401
	h.rejected(now, c, login.Reason{}, apiServer, 2, true, noJitter)
	if len(h.invalidated) != 2 {
		t.Fatalf("%d invalidated credentials kept, want the last 2", len(h.invalidated))
	}
	if err := h.offered(now, a, 0); err != nil {
		t.Errorf("a digest past the last two is still refused: %v", err)
	}
	if err := h.offered(now, b, 0); err != errInvalidated {
		t.Errorf("offered(one the caller invalidated) = %#v, want errInvalidated alone", err)
	}
	errC := h.offered(now, c, 0)
	var got *UnauthorizedError
	if !errors.Is(errC, errInvalidated) || !errors.As(errC, &got) || got != apiServer {
		t.Errorf("offered(one the API server rejected) = %v, want errInvalidated with its 401", errC)
	}
	if a := action(errC); !strings.Contains(a, "replace the credential") {
		t.Errorf("action(the API server's 401, offered again) = %q, want to replace the credential", a)
	}
	if result(errC) != resultRefused || retryable(errC) {
		t.Errorf("result %q, retryable %v: want refused, not retried, as errInvalidated", result(errC), retryable(errC))
	}
	h.rejected(now, d, login.Reason{}, service, 2, true, noJitter)
	errD := h.offered(now, d, 0)
	if a := action(errD); !strings.Contains(a, `"greeter.example"`) {
		t.Errorf("action(a service's 401, offered again) = %q, want its audience", a)
	}
	for _, verb := range []string{"%v", "%+v", "%s", "%q"} {
		if s, want := fmt.Sprintf(verb, errD), fmt.Sprintf(verb, errInvalidated); s != want {
			t.Errorf("%s of the error = %s, want errInvalidated's %s", verb, s, want)
		}
	}
}
