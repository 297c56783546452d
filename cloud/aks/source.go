package aks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/login/loginhttp"
	"github.com/authvault/authvault/redact"
)

// source fetches tokens for one handler, and keeps the last one for the
// next first login (see the package doc's "Fresh tokens").
type source struct {
	// Set before the first login, then read only.
	opts       Options
	now        func() time.Time
	scope      string // the server ID and "/.default"
	newDefault func() (azcore.TokenCredential, error)
	// newCred, when set, makes the credential of each login that does not
	// take the kept token, in place of Options.Credential or
	// DefaultAzureCredential, and says where it comes from.
	newCred func() (azcore.TokenCredential, string, error)
	// secrets, when set, are more secrets to mask in the SDK's text.
	secrets func() []string

	mu       sync.Mutex // guards last, lastFrom, fetched
	last     *azcore.AccessToken
	lastFrom string    // where last came from
	fetched  time.Time // when last was fetched
}

func newDefaultCredential() (azcore.TokenCredential, error) {
	return azidentity.NewDefaultAzureCredential(nil)
}

// token returns a token for a login of kind: the kept one for a first
// login while more than half its lifetime is left, otherwise a new one. It
// also returns where the identity came from.
func (s *source) token(ctx context.Context, kind login.ReasonKind) (*azcore.AccessToken, string, error) {
	if kind == "" || kind == login.FirstLogin {
		if tok, from := s.kept(); tok != nil {
			return tok, from, nil
		}
	}
	cred, from, err := s.credential()
	if err != nil {
		return nil, from, s.failed(ctx, from, err)
	}
	fetched := s.now()
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{s.scope}})
	if err != nil {
		return nil, from, s.failed(ctx, from, err)
	}
	if tok.Token == "" || tok.ExpiresOn.IsZero() {
		return nil, from, s.failed(ctx, from, errors.New("the token has no value or no expiry"))
	}
	s.mu.Lock()
	s.last, s.lastFrom, s.fetched = &tok, from, fetched
	s.mu.Unlock()
	return &tok, from, nil
}

// credential is the credential of a login that does not take the kept
// token, and where it comes from: a new one for each login, unless
// Options gave one.
func (s *source) credential() (azcore.TokenCredential, string, error) {
	switch {
	case s.newCred != nil:
		return s.newCred()
	case s.opts.Credential != nil:
		return s.opts.Credential, fmt.Sprintf("the given %T", s.opts.Credential), nil
	}
	cred, err := s.newDefault()
	return cred, defaultSource(), err
}

// kept returns the last token while more than half its lifetime is left.
func (s *source) kept() (*azcore.AccessToken, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return nil, ""
	}
	life := s.last.ExpiresOn.Sub(s.fetched)
	if s.last.ExpiresOn.Sub(s.now()) <= life/2 {
		return nil, ""
	}
	return s.last, s.lastFrom + " (the token fetched at " + s.fetched.UTC().Format(time.RFC3339) + ")"
}

// defaultSource names what DefaultAzureCredential will find first, by the
// environment's names and IDs, which are no secret.
func defaultSource() string {
	client := os.Getenv("AZURE_CLIENT_ID")
	switch {
	case os.Getenv("AZURE_CLIENT_SECRET") != "":
		return fmt.Sprintf("DefaultAzureCredential (service principal %q, client secret from the environment)", client)
	case os.Getenv("AZURE_CLIENT_CERTIFICATE_PATH") != "":
		return fmt.Sprintf("DefaultAzureCredential (service principal %q, certificate %s)", client, os.Getenv("AZURE_CLIENT_CERTIFICATE_PATH"))
	case os.Getenv("AZURE_FEDERATED_TOKEN_FILE") != "":
		return fmt.Sprintf("DefaultAzureCredential (workload identity %q)", client)
	default:
		return "DefaultAzureCredential (managed identity or developer tools)"
	}
}

// maxText bounds the part of azidentity's own text that failed keeps.
const maxText = 600

// failed is a failed fetch as the vault gets it: the cloud, the server, the
// credential source and what failed, never a secret.
func (s *source) failed(ctx context.Context, from string, err error) error {
	e := &Error{Server: redact.URL(s.opts.Server), Credential: from}
	var auth *azidentity.AuthenticationFailedError
	permanent := false
	switch {
	case ctx.Err() != nil:
		e.What, e.cause = ctx.Err().Error(), ctx.Err()
	case errors.As(err, &auth) && auth.RawResponse != nil:
		ex := loginhttp.Response(auth.RawResponse)
		e.What = ex.String()
		permanent = loginhttp.PermanentStatus(ex.Status)
	case errors.As(err, &auth):
		// No answer (an endpoint not found, a transport error): the
		// text quotes no body.
		e.What = s.localText(err, true)
	default:
		// No credential found: DefaultAzureCredential's lines say why
		// for each credential it tried.
		e.What = s.localText(err, false)
		permanent = true
	}
	if permanent {
		return login.Permanent(e)
	}
	return e
}

// localText is azidentity's text (its first line only, when firstLine) of a
// failure that got no answer (no credential found, a tool missing):
// bounded, URL user info hidden, and the environment's client secret and
// federated token masked, with the source's own secrets.
func (s *source) localText(err error, firstLine bool) string {
	secrets := []string{os.Getenv("AZURE_CLIENT_SECRET"), os.Getenv("AZURE_CLIENT_CERTIFICATE_PASSWORD")}
	if s.secrets != nil {
		secrets = append(secrets, s.secrets()...)
	}
	if f := os.Getenv("AZURE_FEDERATED_TOKEN_FILE"); f != "" {
		if b, rerr := os.ReadFile(f); rerr == nil {
			secrets = append(secrets, strings.TrimSpace(string(b)))
		}
	}
	text := redact.Secrets(err, secrets...).Error()
	if firstLine {
		text, _, _ = strings.Cut(text, "\n")
	}
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > maxText {
		text = text[:maxText] + "…"
	}
	return text
}
