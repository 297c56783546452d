package eks_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/vault"
)

// A token is made locally: the presigned URL it holds names STS, the action
// and the signed cluster header, and the credential expires 14 minutes after
// signing. (In a vault: v.OnLogin(eks.Login(opts)).)
func ExampleLogin() {
	opts := eks.Options{
		Cluster: "prod",
		Region:  "eu-west-1",
		Server:  "https://ABCD.gr7.eu-west-1.eks.amazonaws.com",
		// Default: the SDK's chain (IRSA, EKS Pod Identity, env, IMDS).
		AWS: &aws.Config{Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", "")},
	}
	info, err := eks.Login(opts)(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(info.Token, eks.TokenPrefix))
	u, _ := url.Parse(string(raw))
	q := u.Query()
	fmt.Println(strings.HasPrefix(info.Token, eks.TokenPrefix), u.Host)
	fmt.Println(q.Get("Action"), "X-Amz-Expires="+q.Get("X-Amz-Expires"), "signed:", q.Get("X-Amz-SignedHeaders"))
	signed, _ := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	fmt.Println("valid for", info.Expiration.Sub(signed))
	// Output:
	// true sts.eu-west-1.amazonaws.com
	// GetCallerIdentity X-Amz-Expires=60 signed: host;x-k8s-aws-id
	// valid for 14m0s
}

// A member of a fleet with no stored credential: the hub mints a token for
// its ServiceAccount with the audience STS expects, and each login exchanges
// it for the member's role, whose EKS token reaches the member (it needs a
// hub and AWS: it does not run).
func ExampleFederated() {
	ctx := context.Background()
	hubVault := vault.New(vault.Options{}) // the hub's own credentials
	defer hubVault.Close()
	hub, err := hubVault.RESTConfig(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	var caPEM []byte // the member's CA: DescribeCluster's certificateAuthority.data, decoded

	member := vault.New(vault.Options{})
	defer member.Close()
	member.OnLogin(federation.Login(federation.Config{
		Hub:       hub,
		Namespace: "fleet-system", ServiceAccount: "fleet-operator",
		Audiences: []string{eks.FederatedAudience},
		Member:    federation.Member{Server: "https://ABCD.gr7.eu-west-1.eks.amazonaws.com", CAData: caPEM},
		Provider: eks.Federated(eks.FederatedOptions{
			Cluster: "prod", Region: "eu-west-1",
			RoleARN:      "arn:aws:iam::111122223333:role/fleet-prod",
			ChainRoleARN: "arn:aws:iam::444455556666:role/eks-admin", // optional
		}),
	}))
	cfg, err := member.RESTConfig(ctx) // for client-go, controller-runtime
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Host)
}
