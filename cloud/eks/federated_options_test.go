package eks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
)

// Options that cannot work are permanent errors that say what is missing,
// before anything is asked of STS.
func TestFederatedOptionsThatCannotWork(t *testing.T) {
	member := federation.Member{Server: testServer}
	full := eks.FederatedOptions{Cluster: testCluster, RoleARN: "arn:aws:iam::111122223333:role/fleet", AWS: &aws.Config{Region: testRegion}}
	for _, c := range []struct {
		name   string
		change func(*eks.FederatedOptions, *federation.Member)
		want   string
	}{
		{"no cluster", func(o *eks.FederatedOptions, _ *federation.Member) { o.Cluster = "" }, "eks: FederatedOptions.Cluster is required"},
		{"no role", func(o *eks.FederatedOptions, _ *federation.Member) { o.RoleARN = "" }, `eks: cluster "prod": FederatedOptions.RoleARN is required`},
		{"no region", func(o *eks.FederatedOptions, _ *federation.Member) { o.AWS = &aws.Config{} }, `eks: cluster "prod": no AWS region`},
		{"no server", func(_ *eks.FederatedOptions, m *federation.Member) { m.Server = "" }, `eks: cluster "prod": the member has no server`},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts, m := full, member
			c.change(&opts, &m)
			_, err := eks.Federated(opts).Credential(context.Background(), federation.Token{}, m)
			if _, ok := errors.AsType[*login.PermanentError](err); !ok || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("got %v, want a permanent error starting %q", err, c.want)
			}
		})
	}
}
