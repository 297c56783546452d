package eks_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The test's own identity, which the stand-in knows.
const (
	testRegion    = "eu-west-1"
	testAccount   = "111122223333"
	testKeyID     = "AKIDTESTBASE"
	testSecret    = "base-secret-Zq8vW3"
	testUserARN   = "arn:aws:iam::111122223333:user/operator"
	testUserID    = "AIDATESTOPERATOR" // STS's UserId of testUserARN
	testRoleID    = "AROATESTEKSADMIN" // of the roles the stand-in assumes
	testRoleARN   = "arn:aws:iam::111122223333:role/eks-admin"
	testWebRole   = "arn:aws:iam::111122223333:role/irsa"
	testWebToken  = "eyJ-web-identity-token-Kp2x"
	amzDateLayout = "20060102T150405Z"
)

// stsStub is a loopback STS: it checks the SigV4 signature of every signed
// request with the secret of the key that signed it, recomputed with the
// SDK's signer, and answers GetCallerIdentity (signed by header or
// presigned), AssumeRole and AssumeRoleWithWebIdentity as STS does, in XML.
type stsStub struct {
	t   testing.TB
	srv *httptest.Server

	// Set before the first request.
	lifetime time.Duration // of the credentials it issues; default 1 h
	// webLifetime, when set, is that of AssumeRoleWithWebIdentity's instead.
	webLifetime time.Duration
	// web, when set, is the account's trust in a hub's issuer, which
	// decides AssumeRoleWithWebIdentity; nil: only testWebToken for
	// testWebRole is taken.
	web *oidcTrust
	// revokeSession, when > 0, is the AssumeRole (1 for the first) whose
	// session is revoked the moment it is issued: requests signed with it
	// are then refused as those of a deleted role's sessions are.
	revokeSession int
	hold          chan struct{} // when set, AssumeRole waits for it to close
	arrived       chan struct{} // when set, gets a value as AssumeRole arrives

	mu     sync.Mutex // guards the fields below
	keys   map[string]principal
	calls  map[string]int
	issued []issue // AssumeRole*: what was issued when, in order
	// describedBy has the key of each DescribeCluster's signer, in order.
	describedBy []string
	// assumed has the RoleArn of each AssumeRole asked, in order, and
	// assumedBy the key that signed it.
	assumed, assumedBy []string
}

// principal is an identity the stand-in knows.
type principal struct {
	creds   aws.Credentials
	arn     string
	userID  string    // GetCallerIdentity's UserId: the user's ID, or the role's and the session name
	expires time.Time // of an issued session; zero: never
	revoked bool
}

// refusal is a request STS refuses with its code (403).
type refusal struct{ code, message string }

func (r *refusal) Error() string { return r.message }

// issue is one set of credentials the stand-in issued.
type issue struct {
	at, expires time.Time
	keyID       string
	session     string
	action      string // AssumeRole or AssumeRoleWithWebIdentity
	arn         string // of the session
}

func newSTSStub(t testing.TB) *stsStub {
	s := &stsStub{
		t:        t,
		lifetime: time.Hour,
		keys: map[string]principal{testKeyID: {
			creds:  aws.Credentials{AccessKeyID: testKeyID, SecretAccessKey: testSecret},
			arn:    testUserARN,
			userID: testUserID,
		}},
		calls: map[string]int{},
	}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// count is how many requests for action were answered with success.
func (s *stsStub) count(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[action]
}

// roles are the roles AssumeRole was asked for, in order.
func (s *stsStub) roles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.assumed)
}

// signers are the keys that signed each AssumeRole asked, in order.
func (s *stsStub) signers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.assumedBy)
}

// secrets are the secrets of every session the stand-in issued.
func (s *stsStub) secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.keys {
		if p.creds.SessionToken != "" {
			out = append(out, p.creds.SecretAccessKey, p.creds.SessionToken)
		}
	}
	return out
}

// issues is a copy of what the stand-in issued.
func (s *stsStub) issues() []issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]issue(nil), s.issued...)
}

func (s *stsStub) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		stsError(w, http.StatusBadRequest, "InvalidRequest", "unreadable body")
		return
	}
	params := r.URL.Query()
	if r.Method == http.MethodPost {
		if params, err = url.ParseQuery(string(body)); err != nil {
			stsError(w, http.StatusBadRequest, "MalformedQueryString", "bad form")
			return
		}
	}
	if name, ok := strings.CutPrefix(r.URL.Path, "/clusters/"); ok {
		s.describeCluster(w, r, body, name)
		return
	}
	action := params.Get("Action")
	if action == "AssumeRoleWithWebIdentity" { // the one unsigned action
		if s.web != nil {
			s.web.exchange(w, r, s, params)
			return
		}
		s.assumeWithWebIdentity(w, params)
		return
	}
	who, err := s.verify(r, body)
	if err != nil {
		code := "SignatureDoesNotMatch"
		if ref, ok := errors.AsType[*refusal](err); ok {
			code = ref.code
		}
		s.record("refused:" + code)
		stsError(w, http.StatusForbidden, code, err.Error())
		return
	}
	switch action {
	case "GetCallerIdentity":
		s.record(action)
		type result struct {
			Arn, UserId, Account string
		}
		res := result{Arn: who.arn, UserId: who.userID, Account: testAccount}
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			// As STS answers aws-iam-authenticator's server.
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"GetCallerIdentityResponse": map[string]any{
				"GetCallerIdentityResult": res, "ResponseMetadata": map[string]string{"RequestId": randomHex(8)}}})
			return
		}
		writeXML(w, "GetCallerIdentity", res)
	case "AssumeRole":
		if s.arrived != nil {
			s.arrived <- struct{}{}
		}
		if s.hold != nil {
			select {
			case <-s.hold:
			case <-r.Context().Done():
				return
			}
		}
		s.mu.Lock()
		s.assumed = append(s.assumed, params.Get("RoleArn"))
		s.assumedBy = append(s.assumedBy, who.creds.AccessKeyID)
		s.mu.Unlock()
		if params.Get("RoleSessionName") == "" {
			stsError(w, http.StatusBadRequest, "ValidationError", "no RoleSessionName")
			return
		}
		s.issue(w, action, params.Get("RoleArn"), params.Get("RoleSessionName"))
	default:
		stsError(w, http.StatusBadRequest, "InvalidAction", "unknown action")
	}
}

// testEndpoint is the API server of testCluster that DescribeCluster gives.
const testEndpoint = "https://0123ABCD.gr7.eu-west-1.eks.amazonaws.com"

// describeCluster answers EKS DescribeCluster (REST, JSON) for testCluster.
func (s *stsStub) describeCluster(w http.ResponseWriter, r *http.Request, body []byte, name string) {
	who, err := s.verify(r, body)
	if err != nil {
		w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException")
		http.Error(w, `{"message":"signature does not match"}`, http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet || name != testCluster {
		w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException")
		http.Error(w, `{"message":"No cluster found for name: `+name+`."}`, http.StatusNotFound)
		return
	}
	s.mu.Lock()
	s.calls["DescribeCluster"]++
	s.describedBy = append(s.describedBy, who.creds.AccessKeyID)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"cluster": map[string]any{
		"name": name, "endpoint": testEndpoint, "status": "ACTIVE",
		"certificateAuthority": map[string]string{"data": base64.StdEncoding.EncodeToString(s.caPEM())},
	}})
}

func (s *stsStub) assumeWithWebIdentity(w http.ResponseWriter, params url.Values) {
	if params.Get("WebIdentityToken") != testWebToken || params.Get("RoleArn") != testWebRole {
		stsError(w, http.StatusBadRequest, "InvalidIdentityToken", "the web identity token is not valid")
		return
	}
	s.issue(w, "AssumeRoleWithWebIdentity", params.Get("RoleArn"), params.Get("RoleSessionName"))
}

// issue answers action with new credentials for role.
func (s *stsStub) issue(w http.ResponseWriter, action, role, session string) {
	now := time.Now()
	p := principal{
		creds: aws.Credentials{
			AccessKeyID:     "ASIA" + randomHex(8),
			SecretAccessKey: "issued-secret-" + randomHex(12),
			SessionToken:    "issued-session-" + randomHex(24),
		},
		arn:    strings.Replace(strings.Replace(role, ":iam:", ":sts:", 1), ":role/", ":assumed-role/", 1) + "/" + session,
		userID: testRoleID + ":" + session, // aws-iam-authenticator's Verifier requires the form
	}
	lifetime := s.lifetime
	if action == "AssumeRoleWithWebIdentity" && s.webLifetime > 0 {
		lifetime = s.webLifetime
	}
	expires := now.Add(lifetime)
	p.expires = expires
	s.mu.Lock()
	s.issued = append(s.issued, issue{at: now, expires: expires, keyID: p.creds.AccessKeyID, session: session, action: action, arn: p.arn})
	p.revoked = len(s.issued) == s.revokeSession
	s.keys[p.creds.AccessKeyID] = p
	s.calls[action]++
	s.mu.Unlock()
	type credentials struct {
		AccessKeyId, SecretAccessKey, SessionToken, Expiration string
	}
	type user struct{ Arn, AssumedRoleId string }
	type result struct {
		Credentials     credentials
		AssumedRoleUser user
	}
	writeXML(w, action, result{
		Credentials: credentials{
			AccessKeyId: p.creds.AccessKeyID, SecretAccessKey: p.creds.SecretAccessKey,
			SessionToken: p.creds.SessionToken, Expiration: expires.UTC().Format("2006-01-02T15:04:05.000Z"),
		},
		AssumedRoleUser: user{Arn: p.arn, AssumedRoleId: p.userID},
	})
}

func (s *stsStub) record(action string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[action]++
}

// verify checks r's SigV4 signature, in its Authorization header or its
// query (presigned), by signing a copy of r with the SDK's signer and the
// secret of the key r names, and returns who signed it. On a mismatch the
// error quotes the signed headers as STS quotes the canonical request, so
// a session token sent by header is in it.
func (s *stsStub) verify(r *http.Request, body []byte) (principal, error) {
	q := r.URL.Query()
	presigned := q.Has("X-Amz-Signature")
	var credential, signedHeaders, signature, date string
	if presigned {
		credential, signedHeaders = q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders")
		signature, date = q.Get("X-Amz-Signature"), q.Get("X-Amz-Date")
	} else {
		auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")
		if !ok {
			return principal{}, fmt.Errorf("no SigV4 signature")
		}
		for part := range strings.SplitSeq(auth, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "Credential":
				credential = v
			case "SignedHeaders":
				signedHeaders = v
			case "Signature":
				signature = v
			}
		}
		date = r.Header.Get("X-Amz-Date")
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[2] != testRegion || (scope[3] != "sts" && scope[3] != "eks") || scope[4] != "aws4_request" {
		return principal{}, fmt.Errorf("bad credential scope %q", credential)
	}
	signed, err := time.Parse(amzDateLayout, date)
	if err != nil || time.Since(signed) > 15*time.Minute || time.Until(signed) > 5*time.Minute {
		return principal{}, fmt.Errorf("request expired or not yet valid (X-Amz-Date %q)", date)
	}
	s.mu.Lock()
	who, ok := s.keys[scope[0]]
	s.mu.Unlock()
	switch {
	case !ok || who.revoked:
		return principal{}, &refusal{"InvalidClientTokenId", "the security token included in the request is invalid"}
	case !who.expires.IsZero() && !time.Now().Before(who.expires):
		return principal{}, &refusal{"ExpiredToken", "the security token included in the request is expired"}
	}

	// The copy has the signed headers only: the client's transport adds
	// others (Accept-Encoding) after signing.
	u := *r.URL
	u.Scheme, u.Host = "https", r.Host
	cq := u.Query()
	cq.Del("X-Amz-Signature")
	u.RawQuery = cq.Encode()
	c, err := http.NewRequest(r.Method, u.String(), nil)
	if err != nil {
		return principal{}, err
	}
	var quoted []string
	for _, h := range strings.Split(signedHeaders, ";") {
		switch h {
		case "host":
		case "content-length":
			c.ContentLength = r.ContentLength
		default:
			c.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
		quoted = append(quoted, h+":"+r.Header.Get(h))
	}
	sum := sha256.Sum256(body)
	var want string
	signer := v4.NewSigner()
	if presigned {
		signedURL, _, err := signer.PresignHTTP(context.Background(), who.creds, c, hex.EncodeToString(sum[:]), scope[3], testRegion, signed)
		if err != nil {
			return principal{}, err
		}
		pu, err := url.Parse(signedURL)
		if err != nil {
			return principal{}, err
		}
		want = pu.Query().Get("X-Amz-Signature")
	} else {
		if err := signer.SignHTTP(context.Background(), who.creds, c, hex.EncodeToString(sum[:]), scope[3], testRegion, signed); err != nil {
			return principal{}, err
		}
		_, want, _ = strings.Cut(c.Header.Get("Authorization"), "Signature=")
	}
	if want == "" || !hmac.Equal([]byte(want), []byte(signature)) {
		return principal{}, fmt.Errorf("the request signature we calculated does not match the signature you provided; signed headers: %s",
			strings.Join(quoted, "\n"))
	}
	return who, nil
}

// writeXML writes result in STS's response envelope for action.
func writeXML(w http.ResponseWriter, action string, result any) {
	type metadata struct{ RequestId string }
	out, err := xml.Marshal(struct {
		XMLName  xml.Name
		Xmlns    string `xml:"xmlns,attr"`
		Result   wrapResult
		Metadata metadata `xml:"ResponseMetadata"`
	}{
		XMLName:  xml.Name{Local: action + "Response"},
		Xmlns:    "https://sts.amazonaws.com/doc/2011-06-15/",
		Result:   wrapResult{name: action + "Result", v: result},
		Metadata: metadata{RequestId: randomHex(8)},
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write(out)
}

// wrapResult marshals v as an element named name.
type wrapResult struct {
	name string
	v    any
}

func (r wrapResult) MarshalXML(e *xml.Encoder, _ xml.StartElement) error {
	return e.EncodeElement(r.v, xml.StartElement{Name: xml.Name{Local: r.name}})
}

// stsError writes an STS error response.
func stsError(w http.ResponseWriter, status int, code, message string) {
	type detail struct{ Type, Code, Message string }
	out, _ := xml.Marshal(struct {
		XMLName   xml.Name `xml:"ErrorResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		Error     detail
		RequestId string
	}{Xmlns: "https://sts.amazonaws.com/doc/2011-06-15/", Error: detail{"Sender", code, message}, RequestId: randomHex(8)})
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
