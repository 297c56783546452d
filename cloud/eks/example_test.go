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
