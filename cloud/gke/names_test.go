package gke_test

import (
	"testing"

	"github.com/authvault/authvault/cloud/gke"
	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// The handler names the cluster's endpoint, without user info, in logs,
// errors and Credential.Handler; its metric label is the cloud's.
func TestLoginNamesTheEndpoint(t *testing.T) {
	for server, want := range map[string]string{
		"https://34.1.2.3":                 "gke 34.1.2.3",
		"https://u:s3cret@gke.example:443": "gke gke.example:443",
	} {
		if s := handlerconf.Configure[login.Option](gke.Login(gke.Options{Server: server})); s.ID != want || s.Label != "gke" {
			t.Errorf("ID = %q, label %q; want %q, gke", s.ID, s.Label, want)
		}
	}
}
