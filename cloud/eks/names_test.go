package eks_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/testkit/names"
)

// The handler names the cluster and, when given, the region: in logs,
// errors and Credential.Handler; its metric label is the cloud's. Here its
// login fails at once (an SDK configuration without credentials), and the
// vault's error and login metric show its name.
func TestLoginNamesTheCluster(t *testing.T) {
	for _, tc := range []struct {
		opts eks.Options
		want string
	}{
		{eks.Options{Cluster: "prod", Region: "eu-west-1"}, "eks prod (eu-west-1)"},
		{eks.Options{Cluster: "prod", RoleARN: "arn:aws:iam::123456789012:role/deployer"}, "eks prod"},
	} {
		tc.opts.AWS = &aws.Config{}
		if seen := names.InVault(t, eks.Login(tc.opts)); seen.Name != tc.want || seen.Label != "eks" {
			t.Errorf("named %q, labelled %q; want %q, eks", seen.Name, seen.Label, tc.want)
		}
	}
}
