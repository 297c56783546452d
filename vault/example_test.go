package vault_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// A vault with one handler: it logs in when a credential is first needed,
// and again when the server has rejected the one it had.
func ExampleVault() {
	v := vault.New(vault.Options{})
	defer v.Close()

	var logins atomic.Int64
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		n := logins.Add(1)
		return &login.ConnectionInfo{
			Server: "https://api.example:6443",
			Token:  fmt.Sprintf("token-%d", n), // a new token on each login
		}, nil
	}, login.ID("token-issuer"))

	ctx := context.Background()
	cred, err := v.Select(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cred.Handler, cred.Info.Server, logins.Load())

	// The server answered 401: drop exactly this credential.
	_ = v.Invalidate(ctx, cred, errors.New("401 Unauthorized"))
	next, _ := v.Select(ctx)
	fmt.Println(next.Handler, next != cred, logins.Load())
	// Output:
	// token-issuer https://api.example:6443 1
	// token-issuer true 2
}

// Handlers registered with the package-level OnLogin serve vault.Default.
func ExampleOnLogin() {
	vault.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		return &login.ConnectionInfo{Server: "https://api.example:6443", Token: "t"}, nil
	}, login.ID("example"), login.Retries(3))

	cred, err := vault.Default.Select(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cred.Handler)
	// Output: example
}

// When no handler gives a credential, callers get a LoginError that says
// what each handler did.
func ExampleLoginError() {
	v := vault.New(vault.Options{})
	defer v.Close()
	v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
		return nil, login.Permanent(errors.New("no such secret"))
	}, login.ID("secret-store"))

	_, err := v.Select(context.Background())
	var le *vault.LoginError
	fmt.Println(errors.As(err, &le), le.Handlers[0].Handler)
	fmt.Println(le.Handlers[0].Err)
	// Output:
	// true secret-store
	// no such secret
}
