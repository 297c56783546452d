package aks_test

import (
	"strings"
	"testing"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/testkit/names"
)

// The handler names the cluster's endpoint, without user info, in logs,
// errors and Credential.Handler; its metric label is the cloud's. Here its
// login fails at once (no CAData), and the vault's error, log and login
// metric show its name.
func TestLoginNamesTheEndpoint(t *testing.T) {
	for server, want := range map[string]string{
		"https://prod-dns-1234.hcp.westeurope.azmk8s.io:443": "aks prod-dns-1234.hcp.westeurope.azmk8s.io:443",
		"https://u:s3cret@aks.example":                       "aks aks.example",
	} {
		seen := names.InVault(t, aks.Login(aks.Options{Server: server}))
		if seen.Name != want || seen.Label != "aks" {
			t.Errorf("%s: named %q, labelled %q; want %q, aks", server, seen.Name, seen.Label, want)
		}
		if !strings.Contains(seen.Text, `"handler"="`+want+`"`) || strings.Contains(seen.Text, "s3cret") {
			t.Errorf("%s: the vault's log does not name the handler %q, or shows the password:\n%s", server, want, seen.Text)
		}
	}
}
