package eks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/hubtrust"
	"github.com/authvault/authvault/testkit/testwait"
)

// A Flux ConfigMap of provider aws, as a Flux user writes it, serves a
// fleet member through the stand-in: the role of the ServiceAccount's
// eks.amazonaws.com/role-arn annotation, STS's region and the cluster
// name of the cluster key's ARN; a role chained on top when the
// aws.auth.fluxcd.io/assume-role annotation names one, at the next login
// with no change of the ConfigMap; and the errors of a ConfigMap or
// annotation that says none of these right, each naming what it lacks.
func testFederatedFlux(t *testing.T, hub *hubtrust.Hub) {
	e := newFedEnv(t, hub)
	hub.Annotate(t, map[string]string{"eks.amazonaws.com/role-arn": fedRole})
	t.Cleanup(func() { hub.Annotate(t, nil) })
	o := e.options(fedRole)
	f := hub.FluxFleet(t, e.logs.Logger(1), fleet.FluxOptions{Providers: map[string]fleet.FluxProvider{"aws": eks.Flux(eks.FluxOptions{STSEndpoint: o.STSEndpoint, AWS: o.AWS})}})
	arn := "arn:aws:eks:" + testRegion + ":111122223333:cluster/" + testCluster
	v := hubtrust.Vault(t, f, hub.PutFluxConfigMap(t, "eks", map[string]string{"provider": "aws", "cluster": arn}))
	if got, want := whoAmI(t, v), session(fedRole); got != want {
		t.Errorf("the member sees %q, want %q", got, want)
	}
	if issued := e.sts.issues(); len(issued) != 1 || issued[0].action != "AssumeRoleWithWebIdentity" || issued[0].arn != session(fedRole) {
		t.Errorf("issued %+v, want one AssumeRoleWithWebIdentity of %s", issued, fedRole)
	}

	hub.Annotate(t, map[string]string{"eks.amazonaws.com/role-arn": fedRole, "aws.auth.fluxcd.io/assume-role": "roleARN: " + testRoleARN})
	v.Refresh()
	testwait.For(t, "the member to see the chained role", func() bool { return whoAmI(t, v) == session(testRoleARN) })

	for _, c := range []struct {
		name        string
		data        map[string]string
		annotations map[string]string
		want        string
	}{
		{"no cluster key", map[string]string{"provider": "aws"}, nil, "no cluster key"},
		{"a cluster key that is no ARN", map[string]string{"provider": "aws", "cluster": testCluster}, nil, `the cluster key "prod" is not an EKS cluster ARN`},
		{"no role annotation", nil, map[string]string{}, "has no eks.amazonaws.com/role-arn annotation"},
		{"a role annotation that is no role", nil, map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:user/alice"}, "is not an IAM role's ARN"},
		{"a chain that is no YAML object", nil, map[string]string{"eks.amazonaws.com/role-arn": fedRole, "aws.auth.fluxcd.io/assume-role": testRoleARN}, "is not a YAML object with roleARN alone"},
		{"a chain with a field this does not send", nil, map[string]string{"eks.amazonaws.com/role-arn": fedRole, "aws.auth.fluxcd.io/assume-role": "roleARN: " + testRoleARN + "\nexternalID: x"}, "is not a YAML object with roleARN alone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.annotations != nil {
				hub.Annotate(t, c.annotations)
			}
			data := c.data
			if data == nil {
				data = map[string]string{"provider": "aws", "cluster": arn}
			}
			name := hub.PutFluxConfigMap(t, "eks-"+strings.ToLower(strings.ReplaceAll(c.name, " ", "-")), data)
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
			defer cancel()
			_, err := hubtrust.Vault(t, f, name).Select(ctx)
			e.keep(err)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Flux ConfigMap "+name) {
				t.Errorf("got %v, want an error that names Flux ConfigMap %s and says %q", err, name, c.want)
			}
		})
	}
}
