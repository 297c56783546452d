package federation_test

import (
	"context"
	"fmt"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/vault"
)

// A fleet member reached with nothing stored but its address and CA: the
// member's vault logs in when its config is first used, minting on the hub.
func ExampleLogin() {
	ctx := context.Background()
	hubVault := vault.New(vault.Options{NoFallback: true})
	defer hubVault.Close()
	hubVault.OnLogin(handlers.Static(login.ConnectionInfo{Server: "https://hub.example:6443", Token: "the hub's credential"}))
	memberCA := []byte("-----BEGIN CERTIFICATE-----\n…\n-----END CERTIFICATE-----\n")

	f, err := addMember(ctx, hubVault, memberCA)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	fmt.Println(f.Names())
	// Output: [member-1]
}

func addMember(ctx context.Context, hubVault *vault.Vault, memberCA []byte) (*fleet.Fleet, error) {
	hub, err := hubVault.RESTConfig(ctx) // the hub's own vault
	if err != nil {
		return nil, err
	}
	f := fleet.New(fleet.Options{})
	err = f.Add("member-1", federation.Login(federation.Config{
		Hub:       hub,
		Namespace: "fleet-system", ServiceAccount: "fleet-operator",
		Audiences: []string{"member-1"},
		Member:    federation.Member{Server: "https://member-1.example:6443", CAData: memberCA},
	}))
	return f, err
}
