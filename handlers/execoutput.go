package handlers

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"
)

// The versions of the client.authentication.k8s.io protocol spoken here.
var (
	execV1      = clientauthv1.SchemeGroupVersion.String()
	execV1beta1 = clientauthv1beta1.SchemeGroupVersion.String()
)

const execCredentialKind = "ExecCredential"

// execResult is what a plugin's ExecCredential status gives.
type execResult struct {
	token      string
	cert, key  []byte
	expiration time.Time
}

// parseExecCredential reads a plugin's stdout, which must be an
// ExecCredential of apiVersion. It decodes as client-go's decoder does:
// apiVersion and kind are found whatever their case (client-go's meta
// factory uses encoding/json), the object's fields only under their exact
// names ("Token" is no token), and unknown fields are ignored. Errors say
// what is wrong and never repeat the output: it holds the credential.
func parseExecCredential(apiVersion string, out []byte) (*execResult, error) {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(out, &meta); err != nil {
		return nil, fmt.Errorf("output is not a JSON object%s", jsonErrorPlace(err))
	}
	if meta.APIVersion != apiVersion {
		return nil, fmt.Errorf("output has apiVersion %s, want %q", quoteIf(meta.APIVersion, apiVersionShape), apiVersion)
	}
	if meta.Kind != execCredentialKind {
		return nil, fmt.Errorf("output has kind %s, want %q", quoteIf(meta.Kind, kindShape), execCredentialKind)
	}
	var status *clientauthv1.ExecCredentialStatus
	switch apiVersion {
	case execV1:
		var cred clientauthv1.ExecCredential
		if err := utiljson.Unmarshal(out, &cred); err != nil {
			return nil, fmt.Errorf("output is not an ExecCredential%s", jsonErrorPlace(err))
		}
		status = cred.Status
	case execV1beta1:
		var cred clientauthv1beta1.ExecCredential
		if err := utiljson.Unmarshal(out, &cred); err != nil {
			return nil, fmt.Errorf("output is not an ExecCredential%s", jsonErrorPlace(err))
		}
		if s := cred.Status; s != nil {
			status = &clientauthv1.ExecCredentialStatus{
				ExpirationTimestamp: s.ExpirationTimestamp, Token: s.Token,
				ClientCertificateData: s.ClientCertificateData, ClientKeyData: s.ClientKeyData,
			}
		}
	default:
		return nil, fmt.Errorf("apiVersion %q is not supported", apiVersion)
	}
	if status == nil {
		return nil, errors.New("output has no status")
	}
	r := &execResult{token: status.Token, cert: []byte(status.ClientCertificateData), key: []byte(status.ClientKeyData)}
	switch {
	case len(r.cert) > 0 && len(r.key) == 0:
		return nil, errors.New("output has a client certificate without its key (status.clientKeyData)")
	case len(r.key) > 0 && len(r.cert) == 0:
		return nil, errors.New("output has a client key without its certificate (status.clientCertificateData)")
	case r.token == "" && len(r.cert) == 0:
		return nil, errors.New("output has neither a token nor a client certificate in its status")
	}
	if len(r.cert) > 0 {
		// As client-go: a pair that does not parse fails the login, not
		// the first TLS handshake. tls's error is not quoted: it is about
		// the key.
		if _, err := tls.X509KeyPair(r.cert, r.key); err != nil {
			return nil, errors.New("output has a client certificate and key that are no PEM key pair (status.clientCertificateData, status.clientKeyData)")
		}
	}
	if status.ExpirationTimestamp != nil {
		r.expiration = status.ExpirationTimestamp.Time
	}
	return r, nil
}

// jsonErrorPlace says where JSON went wrong without quoting it.
func jsonErrorPlace(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf(" (syntax error at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf(" (field %q holds a JSON %s, want %s)", typ.Field, typ.Value, typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return " (it ends early)"
	default:
		return " (it does not decode)"
	}
}

// The shapes of the values an error may quote from a plugin's output.
var (
	apiVersionShape = regexp.MustCompile(`^[a-z0-9.-]{1,63}(/[a-z0-9]{1,20})?$`)
	kindShape       = regexp.MustCompile(`^[A-Z][A-Za-z]{0,62}$`)
)

// quoteIf quotes a value from the output when it has the shape it should
// have, and only describes it otherwise: a broken plugin might put anything
// there, even its token.
func quoteIf(s string, shape *regexp.Regexp) string {
	switch {
	case s == "":
		return "none"
	case shape.MatchString(s):
		return strconv.Quote(s)
	default:
		return "of an unexpected form"
	}
}
