package aks_test

import (
	"testing"

	"github.com/authvault/authvault/cloud/aks"
	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// The handler names the cluster's endpoint, without user info, in logs,
// errors and Credential.Handler; its metric label is the cloud's.
func TestLoginNamesTheEndpoint(t *testing.T) {
	for server, want := range map[string]string{
		"https://prod-dns-1234.hcp.westeurope.azmk8s.io:443": "aks prod-dns-1234.hcp.westeurope.azmk8s.io:443",
		"https://u:s3cret@aks.example":                       "aks aks.example",
	} {
		if s := handlerconf.Configure[login.Option](aks.Login(aks.Options{Server: server})); s.ID != want || s.Label != "aks" {
			t.Errorf("ID = %q, label %q; want %q, aks", s.ID, s.Label, want)
		}
	}
}
