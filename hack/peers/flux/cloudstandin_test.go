package flux_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authvault/authvault/testkit/hubtrust"
)

// The clouds' stand-ins know one identity each, set up for the hub's
// ServiceAccounts in cloudNS as a cloud's administrator would: an IAM role
// whose trust policy allows the hub's issuer for clouds/irsa, a workload
// identity pool provider that trusts the issuer (and a Google service
// account that its principal for clouds/wif may impersonate), and an
// Entra ID application whose federated identity credential names
// clouds/azwi.
const (
	awsRole    = "arn:aws:iam::123456789012:role/some-role"
	awsCluster = "test-cluster" // in awsRegion: the cluster the member is
	awsRegion  = "us-east-1"

	gcpPool     = "projects/1234567890/locations/global/workloadIdentityPools/test-pool/providers/test-provider"
	gcpAudience = "//iam.googleapis.com/" + gcpPool
	gcpAccount  = "test-sa@project-id.iam.gserviceaccount.com"

	azureTenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	azureClient = "0b1f6d3e-2c4a-4b7e-9f00-7a3c5e1d2b4f"
	azureScope  = "6dae42f8-4368-4678-94ff-3960e28e3630/.default" // the AKS server application's
)

// subject is the sub of the hub's tokens of ServiceAccount cloudNS/sa.
func subject(sa string) string { return "system:serviceaccount:" + cloudNS + ":" + sa }

// clouds stands in for AWS STS, Google's STS and IAM Credentials API and
// Entra ID, in their wire formats, each checking a hub token as the cloud
// does (hubtrust: the issuer's keys, signature, issuer, audience, expiry;
// then the subject its trust names). It also stands in for what a
// member's authenticator asks the cloud (accept): the tokens it issued,
// and EKS tokens, whose presigned GetCallerIdentity it verifies.
type clouds struct {
	hub atomic.Pointer[hubtrust.Trust] // the hub's issuer and CA, once it runs; nil: every token refused

	mu       sync.Mutex           // guards the fields below
	calls    map[string]int       // answered requests, by the endpoint's name
	tokens   map[string]string    // access token → who it speaks for
	sessions map[string]awsSecret // AWS access key ID → its session
}

func newClouds() *clouds {
	return &clouds{calls: map[string]int{}, tokens: map[string]string{}, sessions: map[string]awsSecret{}}
}

// trust is what the cloud knows of the hub, for audience and sub.
func (c *clouds) trust(audience, sub string) (hubtrust.Trust, bool) {
	t := c.hub.Load()
	if t == nil {
		return hubtrust.Trust{}, false
	}
	tr := *t
	tr.Audience, tr.Subject = audience, sub
	return tr, true
}

// ServeHTTP routes a request by its path, whatever host it was for.
func (c *clouds) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/":
		c.awsSTS(w, r)
	case r.Method == http.MethodPost && p == "/v1/token":
		c.googleSTS(w, r)
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/v1/projects/-/serviceAccounts/") && strings.HasSuffix(p, ":generateAccessToken"):
		c.generateAccessToken(w, r)
	case r.Method == http.MethodGet && p == "/common/discovery/instance":
		c.entraDiscovery(w, r)
	case r.Method == http.MethodGet && strings.HasSuffix(p, "/v2.0/.well-known/openid-configuration"):
		c.entraMetadata(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/oauth2/v2.0/token"):
		c.entraToken(w, r)
	default:
		// DescribeCluster, GetCluster, an ARM call: not served here.
		c.count("unserved " + r.Method + " " + r.Host + p)
		http.NotFound(w, r)
	}
}

// count records one request to the endpoint name.
func (c *clouds) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
}

// counts is a copy of the requests answered so far, by endpoint.
func (c *clouds) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// issue is a new access token that speaks for who, prefixed as the
// cloud's are.
func (c *clouds) issue(prefix, who string) string {
	tok := prefix + randomHex(16)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens[tok] = who
	return tok
}

// accept is the member's authenticator asking the clouds about tok (the
// hub's testcluster.Issuer.SetAccept): whom it speaks for.
func (c *clouds) accept(tok string) (string, bool) {
	if presigned, ok := strings.CutPrefix(tok, "k8s-aws-v1."); ok {
		return c.eksToken(presigned)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	who, ok := c.tokens[tok]
	return who, ok
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lifetime is that of every credential the stand-ins issue.
const lifetime = time.Hour
