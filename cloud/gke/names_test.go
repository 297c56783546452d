package gke_test

import (
	"strings"
	"testing"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/testkit/names"
)

// The handler names the cluster's endpoint, without user info, in logs,
// errors and Credential.Handler; its metric label is the cloud's. Here its
// login fails at once (no CAData), and the vault's error, log and login
// metric show its name.
func TestLoginNamesTheEndpoint(t *testing.T) {
	for server, want := range map[string]string{
		"https://34.1.2.3":                 "gke 34.1.2.3",
		"https://u:s3cret@gke.example:443": "gke gke.example:443",
	} {
		seen := names.InVault(t, gke.Login(gke.Options{Server: server}))
		if seen.Name != want || seen.Label != "gke" {
			t.Errorf("%s: named %q, labelled %q; want %q, gke", server, seen.Name, seen.Label, want)
		}
		if !strings.Contains(seen.Text, `"handler"="`+want+`"`) || strings.Contains(seen.Text, "s3cret") {
			t.Errorf("%s: the vault's log does not name the handler %q, or shows the password:\n%s", server, want, seen.Text)
		}
	}
}
