package gke_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
)

// Options no exchange can work with fail before any request, permanently,
// and say which field is wrong.
func TestFederatedOptions(t *testing.T) {
	member := federation.Member{Server: "https://34.118.0.10"}
	for _, c := range []struct {
		name   string
		opts   gke.FederatedOptions
		member federation.Member
		want   string
	}{
		{"no audience", gke.FederatedOptions{}, member, "FederatedOptions.Audience is required"},
		{"the allowed audience for the provider", gke.FederatedOptions{Audience: gke.AllowedAudience(hubProvider)}, member, "not a pool provider's full resource name"},
		{"a service account that is no email", gke.FederatedOptions{Audience: hubProvider, ServiceAccount: "fleet"}, member, `ServiceAccount "fleet" is not`},
		{"no member", gke.FederatedOptions{Audience: hubProvider}, federation.Member{}, "the member's Server is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.TokenURL = "http://127.0.0.1:1/never-asked"
			info, err := gke.Federated(c.opts).Credential(context.Background(), federation.Token{}, c.member)
			var permanent *login.PermanentError
			if info != nil || !errors.As(err, &permanent) || errors.Is(err, federation.ErrRejected) {
				t.Fatalf("got %v, %v; want a permanent error", info, err)
			}
			if !strings.HasPrefix(err.Error(), "gke: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %q, want it to start with gke: and say %q", err, c.want)
			}
		})
	}
}
