package login_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// Printing a credential never shows its secrets.
func ExampleConnectionInfo_String() {
	info := login.ConnectionInfo{
		Server:           "https://api.example:6443",
		Token:            "do-not-print-me",
		DefaultNamespace: "team-a",
	}
	// The fingerprint is keyed per process: the same token gives another
	// one in the next run. Here it is replaced, to print the rest whole.
	out := strings.ReplaceAll(fmt.Sprintf("%+v", info), info.Fingerprint(), "<8 hex digits>")
	fmt.Println(out)
	// Output:
	// login.ConnectionInfo{Server: "https://api.example:6443", Token: [redacted], DefaultNamespace: "team-a", Fingerprint: <8 hex digits>}
}

// Validate names the field that is wrong.
func ExampleConnectionInfo_Validate() {
	info := login.ConnectionInfo{Server: "api.example:6443", Username: "bob", Token: "t"}
	fmt.Println(info.Validate())
	// Output:
	// login: Server "api.example:6443" is not an absolute https or http URL
	// login: basic auth (Username) and Token are both set; use one
}

// A handler tells the vault how to treat its failures through the error
// it returns.
func ExampleHandler() {
	var fromSecretStore login.Handler = func(ctx context.Context) (*login.ConnectionInfo, error) {
		token, err := os.ReadFile("/etc/operator/token")
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, nil // nothing from me: another handler may have something
		case errors.Is(err, os.ErrPermission):
			return nil, login.Permanent(err) // retrying will not help
		case err != nil:
			return nil, login.Temporary(err, 5*time.Second)
		}
		return &login.ConnectionInfo{
			Server:     "https://api.example:6443",
			Token:      string(token),
			Expiration: time.Now().Add(15 * time.Minute),
		}, nil
	}
	v := vault.New(vault.Options{NoFallback: true})
	defer v.Close()
	v.OnLogin(fromSecretStore, login.ID("secret-store"), login.Retries(3), login.Timeout(10*time.Second))
	// Without the token file, the handler has nothing to offer, and a
	// caller learns why at once.
	_, err := v.Select(context.Background())
	var loginErr *vault.LoginError
	if errors.As(err, &loginErr) {
		for _, o := range loginErr.Handlers {
			fmt.Printf("%s: %v\n", o.Handler, o.Err)
		}
	}
	// Output: secret-store: vault: the handler returned no credential
}

// A handler that caches its token skips the cache when the server has just
// rejected it.
func ExampleReasonFrom() {
	cached := "cached-token"
	handler := func(ctx context.Context) (*login.ConnectionInfo, error) {
		token := cached
		if r, ok := login.ReasonFrom(ctx); ok && r.Kind == login.Rejected {
			fmt.Println("logging in because:", r)
			token = "fresh-token" // ask the issuer, not the cache
		}
		return &login.ConnectionInfo{Server: "https://api.example:6443", Token: token}, nil
	}
	// The vault calls handlers with the reason; a test can too.
	ctx := login.WithReason(context.Background(), login.Reason{
		Kind: login.Rejected, StatusCode: 401, Challenge: `Bearer error="invalid_token"`,
	})
	info, _ := handler(ctx)
	fmt.Println(info.Token)
	// Output:
	// logging in because: rejected by the server (401, WWW-Authenticate: Bearer error="invalid_token")
	// fresh-token
}
