package eks_test

import (
	"testing"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// The handler names the cluster and, when given, the region: in logs,
// errors and Credential.Handler; its metric label is the cloud's.
func TestLoginNamesTheCluster(t *testing.T) {
	for _, tc := range []struct {
		opts eks.Options
		want string
	}{
		{eks.Options{Cluster: "prod", Region: "eu-west-1"}, "eks prod (eu-west-1)"},
		{eks.Options{Cluster: "prod", RoleARN: "arn:aws:iam::123456789012:role/deployer"}, "eks prod"},
	} {
		if s := handlerconf.Configure[login.Option](eks.Login(tc.opts)); s.ID != tc.want || s.Label != "eks" {
			t.Errorf("ID = %q, label %q; want %q, eks", s.ID, s.Label, tc.want)
		}
	}
}
