package aks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/hubtrust"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// A Flux ConfigMap of provider azure, as a Flux user writes it, serves a
// fleet member through the stand-in: the application and tenant of the
// ServiceAccount's azure.workload.identity annotations, with the hub's
// token minted for FederatedAudience as the client assertion. An
// annotation missing or not an ID fails the login with an error that
// names it; the tenant comes of aks.FluxOptions.TenantID when the
// ServiceAccount names none.
func testFederatedFlux(t *testing.T, hub *hubtrust.Hub) {
	e := newEntra(t)
	trust := hub.Trust(aks.FederatedAudience)
	e.fed.trust.Store(&trust)
	auth := testcluster.NewLedger(func(tok string) (string, error) {
		if why := e.check(tok); why != "" {
			return "", errors.New(why)
		}
		return "aad:" + client, nil
	})
	hub.Cluster.Issuer.SetAccept(auth.Accept)
	t.Cleanup(func() { hub.Cluster.Issuer.SetAccept(nil) })
	hub.Annotate(t, map[string]string{"azure.workload.identity/client-id": client, "azure.workload.identity/tenant-id": tenant})
	t.Cleanup(func() { hub.Annotate(t, nil) })

	var logs testlog.Buffer
	opts := aks.FluxOptions{}
	opts.CredentialOptions.ClientOptions = e.clientOptions()
	opts.CredentialOptions.DisableInstanceDiscovery = true
	f := hub.FluxFleet(t, logs.Logger(1), fleet.FluxOptions{Providers: map[string]fleet.FluxProvider{"azure": aks.Flux(opts)}})
	v := hubtrust.Vault(t, f, hub.PutFluxConfigMap(t, "aks", map[string]string{"provider": "azure"}))
	cfg, err := v.RESTConfig(testwait.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := hubtrust.WhoAmI(t, cfg); got != "aad:"+client {
		t.Errorf("the member sees %q, want the application's %q", got, "aad:"+client)
	}
	assertions, _ := e.presented()
	if len(assertions) != 1 {
		t.Errorf("%d hub tokens presented, want 1", len(assertions))
	}

	var errs []error
	for _, c := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"no client id", map[string]string{"azure.workload.identity/tenant-id": tenant}, "has no azure.workload.identity/client-id annotation"},
		{"a client id that is no GUID", map[string]string{"azure.workload.identity/client-id": "client-id", "azure.workload.identity/tenant-id": tenant}, "is not a client ID (a GUID)"},
		{"no tenant id", map[string]string{"azure.workload.identity/client-id": client}, "has no azure.workload.identity/tenant-id annotation"},
		{"a tenant that is a path", map[string]string{"azure.workload.identity/client-id": client, "azure.workload.identity/tenant-id": "../common"}, "is not a tenant ID (a GUID) or domain"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hub.Annotate(t, c.annotations)
			name := hub.PutFluxConfigMap(t, "aks-"+strings.ToLower(strings.ReplaceAll(c.name, " ", "-")), map[string]string{"provider": "azure"})
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
			defer cancel()
			_, err := hubtrust.Vault(t, f, name).Select(ctx)
			errs = append(errs, err)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Flux ConfigMap "+name) {
				t.Errorf("got %v, want an error that names Flux ConfigMap %s and says %q", err, name, c.want)
			}
		})
	}

	t.Run("the default tenant", func(t *testing.T) {
		hub.Annotate(t, map[string]string{"azure.workload.identity/client-id": client})
		opts.TenantID = tenant
		f := hub.FluxFleet(t, logs.Logger(1), fleet.FluxOptions{Providers: map[string]fleet.FluxProvider{"azure": aks.Flux(opts)}})
		v := hubtrust.Vault(t, f, hub.PutFluxConfigMap(t, "aks-default-tenant", map[string]string{"provider": "azure"}))
		cfg, err := v.RESTConfig(testwait.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := hubtrust.WhoAmI(t, cfg); got != "aad:"+client {
			t.Errorf("the member sees %q, want the application's %q", got, "aad:"+client)
		}
	})

	assertions, _ = e.presented()
	secrets := append(assertions, auth.Tokens()...)
	for _, s := range secrets {
		for _, err := range errs {
			if err != nil && strings.Contains(fmt.Sprintf("%v|%+v|%#v|%s|%q", err, err, err, err, err), s) {
				t.Errorf("an error shows a token: %v", err)
			}
		}
		if strings.Contains(logs.String(), s) {
			t.Errorf("the log shows a token (%.12s…)", s)
		}
	}
}
