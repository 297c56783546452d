package flux_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// awsSecret is a session the AWS stand-in issued.
type awsSecret struct {
	creds aws.Credentials
	role  string
}

// awsSTS is STS's query API: AssumeRoleWithWebIdentity, the one action
// the exchange asks, answered in XML. The token is checked as an IAM OIDC
// provider for the hub's issuer checks it (audience sts.amazonaws.com),
// then against the role's trust policy (sub clouds/irsa). Refusals are
// STS's: InvalidIdentityToken (400), AccessDenied (403).
func (c *clouds) awsSTS(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("Action") != "AssumeRoleWithWebIdentity" {
		c.count("aws: unserved " + r.PostForm.Get("Action"))
		stsFault(w, http.StatusBadRequest, "InvalidAction", "the stand-in answers AssumeRoleWithWebIdentity only")
		return
	}
	c.count("aws AssumeRoleWithWebIdentity")
	f := r.PostForm
	trust, ok := c.trust("sts.amazonaws.com", "")
	if !ok {
		stsFault(w, http.StatusBadRequest, "IDPCommunicationError", "the hub is not up")
		return
	}
	claims, err := trust.Check(r.Context(), f.Get("WebIdentityToken"))
	if err != nil {
		stsFault(w, http.StatusBadRequest, "InvalidIdentityToken", "Couldn't verify the web identity token: "+err.Error())
		return
	}
	if f.Get("RoleArn") != awsRole || claims.Subject != subject("irsa") {
		stsFault(w, http.StatusForbidden, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity")
		return
	}
	if f.Get("RoleSessionName") == "" {
		stsFault(w, http.StatusBadRequest, "ValidationError", "RoleSessionName is required")
		return
	}
	creds := aws.Credentials{
		AccessKeyID: "ASIA" + strings.ToUpper(randomHex(8)), SecretAccessKey: randomHex(20), SessionToken: randomHex(32),
		CanExpire: true, Expires: time.Now().Add(lifetime),
	}
	c.mu.Lock()
	c.sessions[creds.AccessKeyID] = awsSecret{creds: creds, role: awsRole}
	c.mu.Unlock()
	type result struct {
		Credentials struct {
			AccessKeyId, SecretAccessKey, SessionToken, Expiration string
		}
		AssumedRoleUser                                 struct{ Arn, AssumedRoleId string }
		SubjectFromWebIdentityToken, Audience, Provider string
	}
	var res result
	res.Credentials.AccessKeyId, res.Credentials.SecretAccessKey, res.Credentials.SessionToken = creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken
	res.Credentials.Expiration = creds.Expires.UTC().Format(time.RFC3339)
	res.AssumedRoleUser.Arn = "arn:aws:sts::123456789012:assumed-role/some-role/" + f.Get("RoleSessionName")
	res.AssumedRoleUser.AssumedRoleId = "AROASTANDIN:" + f.Get("RoleSessionName")
	res.SubjectFromWebIdentityToken, res.Audience, res.Provider = claims.Subject, "sts.amazonaws.com", claims.Issuer
	out, err := xml.Marshal(struct {
		XMLName xml.Name `xml:"AssumeRoleWithWebIdentityResponse"`
		Xmlns   string   `xml:"xmlns,attr"`
		Result  result   `xml:"AssumeRoleWithWebIdentityResult"`
		Meta    struct {
			RequestId string
		} `xml:"ResponseMetadata"`
	}{Xmlns: "https://sts.amazonaws.com/doc/2011-06-15/", Result: res})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write(out)
}

// stsFault answers as STS refuses.
func stsFault(w http.ResponseWriter, status int, code, message string) {
	out, _ := xml.Marshal(struct {
		XMLName xml.Name `xml:"ErrorResponse"`
		Xmlns   string   `xml:"xmlns,attr"`
		Error   struct{ Type, Code, Message string }
	}{Xmlns: "https://sts.amazonaws.com/doc/2011-06-15/", Error: struct{ Type, Code, Message string }{"Sender", code, message}})
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// eksToken checks an EKS token as EKS's authenticator does, by what STS
// would answer its presigned GetCallerIdentity: signed by a session the
// stand-in issued, live, for STS in the cluster's region, with the
// cluster's name in the signed x-k8s-aws-id header. It speaks for the
// session's role (as aws-iam-authenticator maps an assumed role).
func (c *clouds) eksToken(presigned string) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(presigned)
	if err != nil {
		return "", false
	}
	u, err := url.Parse(string(raw))
	if err != nil || u.Scheme != "https" {
		return "", false
	}
	q := u.Query()
	scope := strings.Split(q.Get("X-Amz-Credential"), "/")
	signed, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if q.Get("Action") != "GetCallerIdentity" || len(scope) != 5 || scope[2] != awsRegion || scope[3] != "sts" ||
		err != nil || time.Since(signed) > 15*time.Minute || !strings.Contains(q.Get("X-Amz-SignedHeaders"), "x-k8s-aws-id") {
		return "", false
	}
	c.mu.Lock()
	s, ok := c.sessions[scope[0]]
	c.mu.Unlock()
	if !ok || !time.Now().Before(s.creds.Expires) || q.Get("X-Amz-Security-Token") != s.creds.SessionToken {
		return "", false
	}
	// Sign the same request anew with the session's secret.
	given := q.Get("X-Amz-Signature")
	q.Del("X-Amz-Signature")
	u.RawQuery = q.Encode()
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return "", false
	}
	req.Header.Set("x-k8s-aws-id", awsCluster)
	empty := sha256.Sum256(nil)
	again, _, err := v4.NewSigner().PresignHTTP(context.Background(), s.creds, req, hex.EncodeToString(empty[:]), "sts", awsRegion, signed)
	if err != nil {
		return "", false
	}
	au, err := url.Parse(again)
	if err != nil || !hmac.Equal([]byte(au.Query().Get("X-Amz-Signature")), []byte(given)) {
		return "", false
	}
	return s.role, true
}
