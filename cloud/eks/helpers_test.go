package eks_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/authvault/authvault/cloud/eks"
)

const (
	testCluster = "prod"
	testServer  = "https://prod.eks.example"
)

// staticConfig is an SDK config with fixed credentials whose HTTP client
// trusts the stand-in.
func (s *stsStub) staticConfig(keyID, secret, session string) *aws.Config {
	return &aws.Config{
		Region:      testRegion,
		Credentials: credentials.NewStaticCredentialsProvider(keyID, secret, session),
		HTTPClient:  s.srv.Client(),
	}
}

// options are Options for testCluster with STS at the stand-in.
func (s *stsStub) options(cfg *aws.Config) eks.Options {
	return eks.Options{
		Cluster:     testCluster,
		Server:      testServer,
		CAData:      s.caPEM(),
		STSEndpoint: s.srv.URL,
		AWS:         cfg,
	}
}

// caPEM is the stand-in's certificate, in PEM.
func (s *stsStub) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// webIdentityEnv sets the environment of a pod with IRSA whose token file
// holds token, with STS at the stand-in and nothing else to find.
func (s *stsStub) webIdentityEnv(t *testing.T, token string) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ROLE_SESSION_NAME",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "no-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", write("token", []byte(token)))
	t.Setenv("AWS_ROLE_ARN", testWebRole)
	t.Setenv("AWS_ENDPOINT_URL_STS", s.srv.URL)
	t.Setenv("AWS_CA_BUNDLE", write("ca.pem", s.caPEM()))
}

// presignedURL decodes an EKS token.
func presignedURL(t *testing.T, token string) *url.URL {
	t.Helper()
	enc, ok := strings.CutPrefix(token, eks.TokenPrefix)
	if !ok {
		t.Fatalf("token does not start with %q", eks.TokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("token is not base64url without padding: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("token is no URL: %v", err)
	}
	return u
}

// callPresigned calls u as the API server's authenticator does, with the
// cluster header when cluster is not empty, and returns the status and body.
func (s *stsStub) callPresigned(t *testing.T, u *url.URL, cluster string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cluster != "" {
		req.Header.Set(eks.ClusterHeader, cluster)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// assertNoSecret fails when v, printed with any fmt verb, shows one of
// secrets.
func assertNoSecret(t *testing.T, what string, v any, secrets ...string) {
	t.Helper()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X"} {
		out := fmt.Sprintf(verb, v)
		for _, secret := range secrets {
			if secret == "" {
				continue
			}
			for _, form := range []string{secret, hex.EncodeToString([]byte(secret)), strings.ToUpper(hex.EncodeToString([]byte(secret)))} {
				if strings.Contains(out, form) {
					t.Errorf("%s printed with %s shows a secret (%.12s…): %s", what, verb, secret, out)
				}
			}
		}
	}
}
