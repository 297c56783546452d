package eks

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

const (
	// TokenPrefix starts every EKS token; the base64url of the presigned URL
	// follows.
	TokenPrefix = "k8s-aws-v1."

	// ClusterHeader is the header that carries the cluster's name, signed
	// into the presigned URL.
	ClusterHeader = "x-k8s-aws-id"

	// presignExpires is the X-Amz-Expires of the presigned URL, in seconds.
	// STS ignores it (a presigned GetCallerIdentity is valid 15 minutes after
	// X-Amz-Date); authenticators of EKS's early days refuse a value above
	// 60, so every token maker sends 60.
	presignExpires = "60"

	// urlLifetime is how long STS accepts a presigned URL after signing.
	urlLifetime = 15 * time.Minute

	// skewMargin is taken off urlLifetime for the credential's Expiration:
	// the vault's clock and STS's may differ, and a token sent in its last
	// seconds would reach STS (through the API server) after them.
	skewMargin = time.Minute

	// amzDate is the layout of X-Amz-Date.
	amzDate = "20060102T150405Z"
)

// token is a presigned GetCallerIdentity in its EKS form.
type token struct {
	token  string    // TokenPrefix + base64url(URL); a secret
	signed time.Time // X-Amz-Date: when the URL was signed
}

// presign presigns GetCallerIdentity with client, with cluster in the signed
// ClusterHeader and X-Amz-Expires set.
func presign(ctx context.Context, client *sts.Client, cluster string) (token, error) {
	req, err := sts.NewPresignClient(client).PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{},
		func(po *sts.PresignOptions) {
			po.ClientOptions = append(po.ClientOptions, sts.WithAPIOptions(
				smithyhttp.AddHeaderValue(ClusterHeader, cluster),
				setQuery("X-Amz-Expires", presignExpires),
			))
		})
	if err != nil {
		return token{}, err
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		// Never quote the URL: it holds the signature and any session token.
		return token{}, fmt.Errorf("the presigned URL does not parse")
	}
	signed, err := time.Parse(amzDate, u.Query().Get("X-Amz-Date"))
	if err != nil {
		return token{}, fmt.Errorf("the presigned URL has no valid X-Amz-Date")
	}
	return token{
		token:  TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)),
		signed: signed,
	}, nil
}

// expiration is when the vault should stop using t, signed with creds: the
// end of the URL's lifetime less skewMargin, or the end of creds when that
// comes first (STS refuses a URL whose session token has expired).
func (t token) expiration(creds aws.Credentials) time.Time {
	exp := t.signed.Add(urlLifetime - skewMargin)
	if creds.CanExpire && !creds.Expires.IsZero() && creds.Expires.Before(exp) {
		exp = creds.Expires
	}
	return exp
}

// setQuery is an API option that sets a query parameter of the request
// before it is signed (the Build step comes before Finalize's signing).
func setQuery(key, value string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Build.Add(middleware.BuildMiddlewareFunc("authvault/eks/query/"+key,
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				req, ok := in.Request.(*smithyhttp.Request)
				if !ok {
					return middleware.BuildOutput{}, middleware.Metadata{}, fmt.Errorf("unexpected request type %T", in.Request)
				}
				q := req.URL.Query()
				q.Set(key, value)
				req.URL.RawQuery = q.Encode()
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	}
}
