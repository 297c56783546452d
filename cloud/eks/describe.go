package eks

import (
	"context"
	"encoding/base64"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awseks "github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/authvault/authvault/redact"
)

// endpoint is where a cluster's API server is and how to trust it.
type endpoint struct {
	server string
	caData []byte // PEM
}

// describe asks EKS DescribeCluster for the cluster's endpoint and CA, with
// creds (the credentials that sign the token, so a role that may describe the
// cluster is the one assumed); who says whose they are, for errors.
func (h *handler) describe(ctx context.Context, cfg aws.Config, creds aws.Credentials, who string) (endpoint, error) {
	client := awseks.NewFromConfig(cfg, func(o *awseks.Options) {
		o.Credentials = credentials.StaticCredentialsProvider{Value: creds}
		if h.opts.EKSEndpoint != "" {
			o.BaseEndpoint = aws.String(h.opts.EKSEndpoint)
		}
	})
	out, err := client.DescribeCluster(ctx, &awseks.DescribeClusterInput{Name: aws.String(h.opts.Cluster)})
	if err != nil {
		return endpoint{}, h.errorf("%s: DescribeCluster: %w", who, redact.Secrets(err, creds.SecretAccessKey, creds.SessionToken))
	}
	c := out.Cluster
	switch {
	case c == nil || aws.ToString(c.Endpoint) == "":
		status := types.ClusterStatus("unknown")
		if c != nil {
			status = c.Status
		}
		return endpoint{}, h.errorf("DescribeCluster gives no endpoint (status %s)", status)
	case c.CertificateAuthority == nil || aws.ToString(c.CertificateAuthority.Data) == "":
		return endpoint{}, h.errorf("DescribeCluster gives no certificate authority")
	}
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(c.CertificateAuthority.Data))
	if err != nil {
		return endpoint{}, h.errorf("DescribeCluster's certificate authority is not base64: %w", err)
	}
	return endpoint{server: aws.ToString(c.Endpoint), caData: ca}, nil
}

// sameServer tells whether server (a URL someone gave) is endpoint (the URL
// DescribeCluster gives): https both, the same host (case aside), the
// default port or none, and no path, user info, query or fragment.
func sameServer(server, endpoint string) bool {
	a, err := url.Parse(server)
	if err != nil {
		return false
	}
	b, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		return "443"
	}
	plain := func(u *url.URL) bool {
		return u.Scheme == "https" && u.User == nil && strings.Trim(u.Path, "/") == "" && u.RawQuery == "" && u.Fragment == ""
	}
	return plain(a) && plain(b) && asciiFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// asciiFold tells whether a and b are the same host name, as DNS compares
// them: ASCII letters case aside. strings.EqualFold folds Unicode too, and
// would take the KELVIN SIGN for a k.
func asciiFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if x >= utf8.RuneSelf || y >= utf8.RuneSelf {
			return false
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// endpointRegion is the region in the host name of an EKS endpoint,
// <id>.<label>.<region>.eks.amazonaws.com (.com.cn in China), or "" when
// server is no such URL.
func endpointRegion(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return ""
	}
	host := strings.ToLower(u.Hostname())
	for _, suffix := range []string{".eks.amazonaws.com", ".eks.amazonaws.com.cn"} {
		rest, ok := strings.CutSuffix(host, suffix)
		if !ok {
			continue
		}
		if labels := strings.Split(rest, "."); len(labels) == 3 && regionName(labels[2]) {
			return labels[2]
		}
	}
	return ""
}

// regionName tells whether s looks like an AWS region: lower-case letters,
// digits and dashes, as us-east-1 or cn-northwest-1.
func regionName(s string) bool {
	if s == "" || len(s) > 32 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '-' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
