package eks

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/fleet"
)

// The ServiceAccount annotations the provider aws of a Flux ConfigMap
// reads: the role the hub's token is exchanged for (IRSA's annotation,
// as Flux reads it), and a role assumed on top of it, as a YAML object
// whose roleARN names it (the annotation fluxcd/pkg pull request 1088
// proposes; Flux does not serve it yet).
const (
	roleARNAnnotation    = "eks.amazonaws.com/role-arn"
	assumeRoleAnnotation = "aws.auth.fluxcd.io/assume-role"
)

// FluxOptions are this process's own settings for the Flux ConfigMaps of
// provider aws. What differs per member (its cluster, its roles) comes of
// the ConfigMap and its ServiceAccount.
type FluxOptions struct {
	// STSEndpoint is the STS endpoint every exchange, AssumeRole and
	// presigned token uses, as FederatedOptions.STSEndpoint. Default: the
	// SDK's endpoint of the cluster's region. It receives the hub's
	// tokens: set it only from the process's own configuration.
	STSEndpoint string
	// AWS is the SDK configuration to take the HTTP client and the
	// retryer from, as FederatedOptions.AWS. Default: the SDK's default
	// configuration, loaded at the first exchange and shared.
	AWS *aws.Config
}

// Flux serves the Flux ConfigMaps whose provider key is aws, as Flux's
// aws provider reads them (fleet.FluxOptions.Providers["aws"]):
//
//   - the ConfigMap's cluster key is the member's EKS cluster ARN
//     (arn:aws:eks:REGION:ACCOUNT:cluster/NAME), which gives STS's region
//     and the cluster name signed into the token; required, with the
//     address and ca.crt keys, which say where the token goes;
//   - the ServiceAccount's eks.amazonaws.com/role-arn annotation names the
//     IAM role the hub's token is exchanged for
//     (AssumeRoleWithWebIdentity): its trust policy allows the account's
//     IAM OIDC provider for the hub's issuer, for the ServiceAccount's
//     subject;
//   - its aws.auth.fluxcd.io/assume-role annotation, when set
//     ("roleARN: arn:aws:iam::ACCOUNT:role/NAME"), names a role that
//     role then assumes (FederatedOptions.ChainRoleARN): a member of
//     another account;
//   - the tokens are minted for FederatedAudience unless the ConfigMap's
//     audiences key names others.
//
// A ConfigMap or annotation that says none of these right fails the
// member's login with an error that names the key or annotation and what
// it must match; a change of the annotations serves at the next login.
func Flux(opts FluxOptions) fleet.FluxProvider {
	defaults := &defaultConfig{}
	return fleet.FluxProvider{
		Audiences: func(*corev1.ServiceAccount) ([]string, error) { return []string{FederatedAudience}, nil },
		New: func(_ context.Context, c fleet.FluxCluster) (federation.Provider, error) {
			fo, err := fluxOptions(c)
			if err != nil {
				return nil, err
			}
			fo.STSEndpoint, fo.AWS = opts.STSEndpoint, opts.AWS
			return &federated{opts: fo, defaults: defaults}, nil
		},
	}
}

// An EKS cluster's ARN, with its region and name (EKS's rules: up to 100
// letters, digits, hyphens and underscores, a letter or digit first).
var clusterARN = regexp.MustCompile(`^arn:aws[a-z-]*:eks:([a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}):[0-9]{12}:cluster/([A-Za-z0-9][A-Za-z0-9_-]{0,99})$`)

// An IAM role's ARN: an account, an optional path, a name.
var roleARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/(?:[\x21-\x7e]{1,510}/)?[A-Za-z0-9+=,.@_-]{1,64}$`)

// fluxOptions reads what c's ConfigMap and ServiceAccount say.
func fluxOptions(c fleet.FluxCluster) (FederatedOptions, error) {
	if c.Cluster == "" {
		return FederatedOptions{}, errors.New("eks: no cluster key: provider aws needs the member's EKS cluster ARN (arn:aws:eks:REGION:ACCOUNT:cluster/NAME), for STS's region and the cluster name signed into the token")
	}
	m := clusterARN.FindStringSubmatch(c.Cluster)
	if m == nil {
		return FederatedOptions{}, fmt.Errorf("eks: the cluster key %q is not an EKS cluster ARN (arn:aws:eks:REGION:ACCOUNT:cluster/NAME)", quoted(c.Cluster))
	}
	sa := c.ServiceAccount.Namespace + "/" + c.ServiceAccount.Name
	role, ok := c.ServiceAccount.Annotations[roleARNAnnotation]
	switch {
	case !ok:
		return FederatedOptions{}, fmt.Errorf("eks: ServiceAccount %s has no %s annotation: the IAM role the hub's token is exchanged for", sa, roleARNAnnotation)
	case !roleARN.MatchString(role):
		return FederatedOptions{}, fmt.Errorf("eks: ServiceAccount %s: annotation %s %q is not an IAM role's ARN (arn:aws:iam::ACCOUNT:role/NAME)", sa, roleARNAnnotation, quoted(role))
	}
	opts := FederatedOptions{Cluster: m[2], Region: m[1], RoleARN: role}
	if raw, ok := c.ServiceAccount.Annotations[assumeRoleAnnotation]; ok {
		var chain struct {
			RoleARN string `json:"roleARN"`
		}
		if err := yaml.UnmarshalStrict([]byte(raw), &chain); err != nil {
			return FederatedOptions{}, fmt.Errorf("eks: ServiceAccount %s: annotation %s is not a YAML object with roleARN alone: %s", sa, assumeRoleAnnotation, quoted(err.Error()))
		}
		if !roleARN.MatchString(chain.RoleARN) {
			return FederatedOptions{}, fmt.Errorf("eks: ServiceAccount %s: annotation %s: roleARN %q is not an IAM role's ARN (arn:aws:iam::ACCOUNT:role/NAME)", sa, assumeRoleAnnotation, quoted(chain.RoleARN))
		}
		opts.ChainRoleARN = chain.RoleARN
	}
	return opts, nil
}

// maxQuoted bounds the bytes an error quotes of a value someone else wrote.
const maxQuoted = 100

// quoted is s, cut to maxQuoted bytes.
func quoted(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return strings.ToValidUTF8(s[:maxQuoted], "") + "…"
}
