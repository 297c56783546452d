package eks_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/authvault/authvault/cloud/eks"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// A token is a presigned GetCallerIdentity for the STS endpoint, with
// X-Amz-Expires=60 and the cluster header signed, that the stand-in accepts
// when called with that header, and only then.
func TestTokenIsPresignedGetCallerIdentity(t *testing.T) {
	s := newSTSStub(t)
	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	var logs testlog.Buffer
	ctx := logr.NewContext(context.Background(), logs.Logger(1))
	before := time.Now().Truncate(time.Second)
	info, err := eks.Login(opts)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Server != testServer || !bytes.Equal(info.CAData, opts.CAData) {
		t.Errorf("got server %q and CA of %d bytes, want %q and the stand-in's", info.Server, len(info.CAData), testServer)
	}
	u := presignedURL(t, info.Token)
	q := u.Query()
	for k, want := range map[string]string{
		"Action":              "GetCallerIdentity",
		"Version":             "2011-06-15",
		"X-Amz-Expires":       "60",
		"X-Amz-Algorithm":     "AWS4-HMAC-SHA256",
		"X-Amz-SignedHeaders": "host;x-k8s-aws-id",
	} {
		if got := q.Get(k); got != want {
			t.Errorf("got %s=%q, want %q", k, got, want)
		}
	}
	if got, want := u.Scheme+"://"+u.Host, s.srv.URL; got != want {
		t.Errorf("got a URL for %s, want %s", got, want)
	}
	if !strings.HasPrefix(q.Get("X-Amz-Credential"), testKeyID+"/") {
		t.Errorf("got X-Amz-Credential %q, want the test key's", q.Get("X-Amz-Credential"))
	}
	signed, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	if signed.Before(before) || signed.After(time.Now()) {
		t.Errorf("signed at %v, want between %v and now", signed, before)
	}
	if want := signed.Add(14 * time.Minute); !info.Expiration.Equal(want) {
		t.Errorf("got expiration %v, want signing time + 14 min: %v", info.Expiration, want)
	}

	if code, body := s.callPresigned(t, u, testCluster); code != http.StatusOK || !strings.Contains(body, testUserARN) {
		t.Errorf("calling the URL with the cluster header: got %d %s, want 200 with %s", code, body, testUserARN)
	}
	if code, _ := s.callPresigned(t, u, "other"); code != http.StatusForbidden {
		t.Errorf("calling the URL for another cluster: got %d, want 403", code)
	}
	if code, _ := s.callPresigned(t, u, ""); code != http.StatusForbidden {
		t.Errorf("calling the URL without the cluster header: got %d, want 403", code)
	}
	assertNoSecret(t, "the log", logs.String(), testSecret, info.Token, u.String(), q.Get("X-Amz-Signature"))
	if !strings.Contains(logs.String(), "eks: token made") {
		t.Errorf("the log has no line for the login: %s", logs.String())
	}
}

// Without STSEndpoint, the URL is for the region's STS.
func TestRegionalEndpointByDefault(t *testing.T) {
	s := newSTSStub(t)
	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.STSEndpoint = ""
	opts.Region = "ap-southeast-2"
	info, err := eks.Login(opts)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u := presignedURL(t, info.Token)
	if got, want := u.Scheme+"://"+u.Host, "https://sts.ap-southeast-2.amazonaws.com"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := u.Query().Get("X-Amz-Credential"); !strings.Contains(got, "/ap-southeast-2/sts/") {
		t.Errorf("got credential scope %q, want ap-southeast-2's", got)
	}
}

// With RoleARN, the base credentials assume the role (session "authvault")
// first, and the token speaks for the role.
func TestRoleAssumedFirst(t *testing.T) {
	s := newSTSStub(t)
	s.lifetime = 5 * time.Minute
	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.RoleARN = testRoleARN
	info, err := eks.Login(opts)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	issued := s.issues()
	if len(issued) != 1 || s.count("AssumeRole") != 1 {
		t.Fatalf("got %d credentials issued, %d AssumeRole, want 1", len(issued), s.count("AssumeRole"))
	}
	if issued[0].session != eks.SessionName {
		t.Errorf("got session name %q, want %q", issued[0].session, eks.SessionName)
	}
	u := presignedURL(t, info.Token)
	if got := u.Query().Get("X-Amz-Credential"); !strings.HasPrefix(got, issued[0].keyID+"/") {
		t.Errorf("got X-Amz-Credential %q, want the role's key %s", got, issued[0].keyID)
	}
	if u.Query().Get("X-Amz-Security-Token") == "" {
		t.Error("the URL has no X-Amz-Security-Token: the role's session would not be known")
	}
	want := "arn:aws:sts::111122223333:assumed-role/eks-admin/authvault"
	if code, body := s.callPresigned(t, u, testCluster); code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("got %d %s, want 200 with %s", code, body, want)
	}
	// The role's session ends before the URL's 14 minutes: so does the token.
	if !info.Expiration.Equal(issued[0].expires.Truncate(time.Millisecond)) {
		t.Errorf("got expiration %v, want the role session's end %v", info.Expiration, issued[0].expires)
	}
}

// In a pod with IRSA (a web identity token file and a role in the
// environment), the default chain's credentials make the token.
func TestWebIdentityFromEnvironment(t *testing.T) {
	s := newSTSStub(t)
	s.webIdentityEnv(t, testWebToken)
	opts := s.options(nil)
	opts.STSEndpoint = "" // AWS_ENDPOINT_URL_STS says where STS is
	opts.Region = testRegion
	info, err := eks.Login(opts)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.count("AssumeRoleWithWebIdentity"); got != 1 {
		t.Errorf("got %d AssumeRoleWithWebIdentity, want 1", got)
	}
	u := presignedURL(t, info.Token)
	if code, body := s.callPresigned(t, u, testCluster); code != http.StatusOK || !strings.Contains(body, "assumed-role/irsa/") {
		t.Errorf("got %d %s, want 200 with the IRSA role", code, body)
	}
	if !info.Expiration.After(time.Now()) || info.Expiration.After(time.Now().Add(14*time.Minute)) {
		t.Errorf("got expiration %v, want within 14 min", info.Expiration)
	}
}

// Credentials that STS refuses give an error naming the cloud, the cluster
// and the credentials' source, with no secret in any form.
func TestRefusedCredentialsNameTheirSource(t *testing.T) {
	t.Run("wrong secret assuming a role", func(t *testing.T) {
		s := newSTSStub(t)
		const wrongSecret, session = "wrong-secret-Hj7", "base-session-token-Uu1"
		opts := s.options(s.staticConfig(testKeyID, wrongSecret, session))
		opts.RoleARN = testRoleARN
		_, err := eks.Login(opts)(context.Background())
		if err == nil {
			t.Fatal("got no error")
		}
		for _, want := range []string{`eks: cluster "prod": `, "assuming role \"" + testRoleARN + "\"", "Options.AWS", "SignatureDoesNotMatch"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		assertNoSecret(t, "the error", err, wrongSecret, session)
	})
	t.Run("web identity token refused", func(t *testing.T) {
		s := newSTSStub(t)
		const badToken = "eyJ-stale-web-token-Lm4"
		s.webIdentityEnv(t, badToken)
		opts := s.options(nil)
		opts.STSEndpoint, opts.Region = "", testRegion
		_, err := eks.Login(opts)(context.Background())
		if err == nil {
			t.Fatal("got no error")
		}
		for _, want := range []string{`eks: cluster "prod": credentials from web identity (AWS_ROLE_ARN=` + testWebRole, "InvalidIdentityToken"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		assertNoSecret(t, "the error", err, badToken)
	})
}

// Options that cannot work are permanent errors: the vault does not retry.
func TestIncompleteOptionsArePermanent(t *testing.T) {
	s := newSTSStub(t)
	noRegion := s.staticConfig(testKeyID, testSecret, "")
	noRegion.Region = ""
	for name, opts := range map[string]eks.Options{
		"no cluster": {Server: testServer, Region: testRegion},
		"no region":  {Cluster: testCluster, Server: testServer, AWS: noRegion},
	} {
		_, err := eks.Login(opts)(context.Background())
		var perm *login.PermanentError
		if !errors.As(err, &perm) || !strings.HasPrefix(err.Error(), "eks: ") {
			t.Errorf("%s: got %v, want a permanent eks: error", name, err)
		}
	}
}

// A login whose context ends while STS does not answer returns at once.
func TestCanceledLoginReturnsPromptly(t *testing.T) {
	s := newSTSStub(t)
	s.hold, s.arrived = make(chan struct{}), make(chan struct{}, 1)
	t.Cleanup(func() { close(s.hold) }) // before the server closes
	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.RoleARN = testRoleARN
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := eks.Login(opts)(ctx)
		done <- err
	}()
	<-s.arrived
	canceled := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		t.Logf("returned %v after the cancel", time.Since(canceled))
	case <-time.After(testwait.Hang): // the STS holds the call: only the cancel ends the login
		t.Fatalf("the login did not return %v after its context was canceled", testwait.Hang)
	}
}

// Without Server, DescribeCluster gives the endpoint and CA, asked with the
// credentials that sign the token (here the assumed role's).
func TestServerFromDescribeCluster(t *testing.T) {
	s := newSTSStub(t)
	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.Server, opts.CAData, opts.EKSEndpoint, opts.RoleARN = "", nil, s.srv.URL, testRoleARN
	info, err := eks.Login(opts)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Server != testEndpoint || !bytes.Equal(info.CAData, s.caPEM()) {
		t.Errorf("got server %q and CA %q, want %q and the cluster's CA", info.Server, info.CAData, testEndpoint)
	}
	s.mu.Lock()
	by := append([]string(nil), s.describedBy...)
	s.mu.Unlock()
	if issued := s.issues(); len(by) != 1 || len(issued) != 1 || by[0] != issued[0].keyID {
		t.Errorf("DescribeCluster signed by %v, want once by the role's key", by)
	}
	if code, _ := s.callPresigned(t, presignedURL(t, info.Token), testCluster); code != http.StatusOK {
		t.Errorf("the token does not verify: %d", code)
	}

	opts.Cluster = "gone"
	_, err = eks.Login(opts)(context.Background())
	for _, want := range []string{`eks: cluster "gone": role "` + testRoleARN + `"`, "DescribeCluster", "ResourceNotFoundException"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

// An SDK error that quotes a URL does not show its user info: here the
// container credentials endpoint's (EKS Pod Identity), which the SDK quotes
// with the user name and the password masked by net/http.
func TestURLUserInfoRedacted(t *testing.T) {
	s := newSTSStub(t)
	s.webIdentityEnv(t, testWebToken)
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
	const user, password = "tok3n-in-url", "pw-in-url"
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://"+user+":"+password+"@127.0.0.1:1/creds") // nothing listens there
	opts := s.options(nil)
	opts.Region = testRegion
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := eks.Login(opts)(ctx)
	if err == nil || !strings.Contains(err.Error(), "container endpoint (EKS Pod Identity)") {
		t.Fatalf("got %v, want an error naming the container endpoint", err)
	}
	assertNoSecret(t, "the error", err, user, password)
}

// Logins of one handler that run at once take turns, and each gets a token.
func TestConcurrentLogins(t *testing.T) {
	s := newSTSStub(t)
	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.RoleARN = testRoleARN
	h := eks.Login(opts)
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			_, err := h(context.Background())
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := s.count("AssumeRole"); got != cap(errs) {
		t.Errorf("got %d AssumeRole, want %d", got, cap(errs))
	}
}

// With CheckServer, a Server that is not the cluster's endpoint gets no
// token: a permanent error; the endpoint itself, written another way, gets
// one, with the cluster's CA rather than the one given.
func TestCheckServer(t *testing.T) {
	s := newSTSStub(t)
	opts := s.options(s.staticConfig(testKeyID, testSecret, ""))
	opts.EKSEndpoint, opts.CheckServer = s.srv.URL, true
	for _, server := range []string{"https://attacker.example", testEndpoint + "/k8s", "http://0123ABCD.gr7.eu-west-1.eks.amazonaws.com",
		"https://u@0123ABCD.gr7.eu-west-1.eks.amazonaws.com", "https://0123ABCD.gr7.eu-west-1.eks.amazonaws.com:8443"} {
		opts.Server = server
		info, err := eks.Login(opts)(context.Background())
		var perm *login.PermanentError
		if !errors.As(err, &perm) || !strings.Contains(err.Error(), "is not the cluster's endpoint") || info != nil {
			t.Errorf("server %s: got %v, %v; want no token and a permanent error", server, info, err)
		}
	}
	opts.Server, opts.CAData = "https://0123abcd.GR7.eu-west-1.eks.amazonaws.com:443/", []byte("a CA the writer chose")
	info, err := eks.Login(opts)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(info.CAData, s.caPEM()) {
		t.Errorf("got CA %q, want the cluster's", info.CAData)
	}
}
