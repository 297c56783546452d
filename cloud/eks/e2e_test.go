package eks_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/rotation"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

// End to end, on the embedded API server (KUBEBUILDER_ASSETS must name the
// envtest binaries: make test sets it), whose webhook accepts an EKS token
// only once the STS stand-in has answered its presigned GetCallerIdentity:
// a vault with eks.Login serves 4 callers creating, updating, listing and deleting ConfigMaps (rotation.Run) for 10 s while
// the role's 3-s sessions make each token expire within seconds, and the
// stand-in revokes one session the moment it issues it. (A session revoked
// while its token serves would be noticed only when the API server's review
// cache, testcluster.ReviewCacheTTL, runs out: by then the vault has moved
// to the next session.) No caller sees an error: the revoked token meets its
// 401 at the webhook and the vault replays the request with another.
func TestEndToEndRotationAndRevocation(t *testing.T) {
	const (
		sessionLifetime = 3 * time.Second
		loadFor         = 10 * time.Second
		workers         = 4
		revoked         = 3 // the AssumeRole whose session is revoked
	)
	c, err := testcluster.Start()
	if err != nil {
		t.Fatalf("%v (here: KUBEBUILDER_ASSETS=$(bash ../../hack/envtest.sh) go test ./...)", err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	}()

	s := newSTSStub(t)
	s.lifetime = sessionLifetime
	s.revokeSession = revoked
	auth := testcluster.NewLedger((&iamAuthenticator{sts: s, cluster: testCluster}).verify)
	c.Issuer.SetAccept(auth.Accept)

	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.RoleARN = testRoleARN
	opts.Server, opts.CAData = c.Server, c.CAData
	var logs testlog.Buffer
	v := vault.New(vault.Options{NoFallback: true, Logger: logs.Logger(1)})
	defer v.Close()
	v.OnLogin(eks.Login(opts), login.Timeout(5*time.Second))

	ctx, cancel := context.WithTimeout(context.Background(), loadFor+20*time.Second)
	defer cancel()
	cfg, err := v.RESTConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // load: no client-side limit, as the rotation scenario runs it
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	stats := rotation.Run(ctx, cs, "default", workers, loadFor, nil)

	accepted, rejected, why := auth.Counts()
	t.Logf("%d requests by %d callers in %v; %d sessions issued; tokens accepted at the webhook: %d, rejected: %d (%s); STS refusals: %d revoked, %d expired",
		stats.Requests, workers, loadFor, len(s.issues()), accepted, rejected, strings.Join(why, "; "),
		s.count("refused:InvalidClientTokenId"), s.count("refused:ExpiredToken"))
	if stats.FirstError != nil {
		t.Errorf("%d of %d requests failed (%d 401s), want none; the first: %v", stats.Unauthorized+stats.OtherErrors, stats.Requests, stats.Unauthorized, stats.FirstError)
	}
	if stats.Requests < workers*10 {
		t.Errorf("%d requests in %v, want at least %d: the load did not run", stats.Requests, loadFor, workers*10)
	}
	if accepted < 3 {
		t.Errorf("%d tokens accepted, want at least 3: the tokens did not rotate as their sessions ended", accepted)
	}
	if len(s.issues()) < revoked || rejected == 0 || s.count("refused:InvalidClientTokenId") == 0 {
		t.Errorf("%d sessions issued, %d tokens rejected, %d STS calls refused as revoked: want the revoked session's token sent, refused by STS and rejected by the webhook",
			len(s.issues()), rejected, s.count("refused:InvalidClientTokenId"))
	}

	// The vault's credentials speak for the role's session, the user the
	// webhook named.
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := review.Status.UserInfo.Username, "arn:aws:sts::111122223333:assumed-role/eks-admin/"+eks.SessionName; got != want {
		t.Errorf("the API server sees %q, want %q", got, want)
	}

	out := logs.String()
	for _, tok := range auth.Tokens() {
		if strings.Contains(out, tok) || strings.Contains(out, presignedURL(t, tok).Query().Get("X-Amz-Signature")) {
			t.Errorf("the vault's log shows a token or its signature")
			break
		}
	}
	if t.Failed() {
		t.Logf("the vault's log:\n%s", out)
	}
}

// iamAuthenticator is the API server's side of EKS, as aws-iam-authenticator's
// server does it: a token is good when it is a presigned GetCallerIdentity
// for the STS it trusts, with the cluster's header signed, and STS answers
// the URL, called with that header; the user is the ARN STS names.
type iamAuthenticator struct {
	sts     *stsStub
	cluster string
}

// verify asks STS who signed tok.
func (a *iamAuthenticator) verify(tok string) (string, error) {
	enc, ok := strings.CutPrefix(tok, eks.TokenPrefix)
	if !ok {
		return "", errors.New("not an EKS token")
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", errors.New("not base64url")
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return "", errors.New("no URL")
	}
	trusted, err := url.Parse(a.sts.srv.URL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	expires, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	switch {
	case u.Scheme != "https" || u.Host != trusted.Host || u.Path != "/":
		return "", fmt.Errorf("not the trusted STS: %s", u.Host)
	case q.Get("Action") != "GetCallerIdentity":
		return "", fmt.Errorf("action %q", q.Get("Action"))
	case !slices.Contains(strings.Split(q.Get("X-Amz-SignedHeaders"), ";"), eks.ClusterHeader):
		return "", fmt.Errorf("%s is not signed", eks.ClusterHeader)
	case err != nil || expires > 60:
		return "", fmt.Errorf("X-Amz-Expires %q, want at most 60", q.Get("X-Amz-Expires"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", errors.New("no request")
	}
	req.Header.Set(eks.ClusterHeader, a.cluster)
	req.Header.Set("Accept", "application/json")
	resp, err := a.sts.srv.Client().Do(req)
	if err != nil {
		return "", errors.New("STS unreachable")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("STS answered %d", resp.StatusCode)
	}
	var body struct {
		GetCallerIdentityResponse struct {
			GetCallerIdentityResult struct{ Arn string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.GetCallerIdentityResponse.GetCallerIdentityResult.Arn == "" {
		return "", errors.New("STS named no ARN")
	}
	return body.GetCallerIdentityResponse.GetCallerIdentityResult.Arn, nil
}
