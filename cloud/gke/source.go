package gke

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/login/loginhttp"
)

// source fetches access tokens for one handler, and keeps the last one for
// the next first login (see the package doc's "Fresh tokens").
type source struct {
	opts Options
	now  func() time.Time

	mu       sync.Mutex // guards last, lastFrom, fetched
	last     *oauth2.Token
	lastFrom string    // where last came from
	fetched  time.Time // when last was fetched
}

// token returns a token for a login of kind: the kept one for a first
// login while more than half its lifetime is left, otherwise a new one. It
// also returns where the identity came from.
func (s *source) token(ctx context.Context, kind login.ReasonKind) (*oauth2.Token, string, error) {
	if kind == "" || kind == login.FirstLogin {
		if tok, from := s.kept(); tok != nil {
			return tok, from, nil
		}
	}
	rec := &loginhttp.Recorder{Ctx: ctx}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: rec})
	creds, from, err := s.credentials(ctx)
	if err != nil {
		return nil, from, s.failed(ctx, rec, from, err)
	}
	fetched := s.now()
	tok, err := creds.TokenSource.Token()
	if err != nil {
		return nil, from, s.failed(ctx, rec, from, err)
	}
	if tok.AccessToken == "" || tok.Expiry.IsZero() {
		return nil, from, s.failed(ctx, rec, from, errors.New("the token has no value or no expiry"))
	}
	s.mu.Lock()
	s.last, s.lastFrom, s.fetched = tok, from, fetched
	s.mu.Unlock()
	return tok, from, nil
}

// kept returns the last token while more than half its lifetime is left.
func (s *source) kept() (*oauth2.Token, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return nil, ""
	}
	life := s.last.Expiry.Sub(s.fetched)
	if s.last.Expiry.Sub(s.now()) <= life/2 {
		return nil, ""
	}
	return s.last, s.lastFrom + " (the token fetched at " + s.fetched.UTC().Format(time.RFC3339) + ")"
}

// credentials builds the identity's credentials for one fetch, with ctx
// (which carries the login's HTTP client), and names where they came from.
func (s *source) credentials(ctx context.Context) (*google.Credentials, string, error) {
	params := google.CredentialsParams{Scopes: s.opts.Scopes}
	switch c := s.opts.Credentials; {
	case c != nil && len(c.JSON) > 0:
		return fromJSON(ctx, c.JSON, params)
	case c != nil && c.TokenSource != nil:
		return c, "the given token source", nil
	case c != nil:
		return nil, "the given credentials", errors.New("gke: Options.Credentials has neither JSON nor a TokenSource")
	case len(s.opts.CredentialsJSON) > 0:
		return fromJSON(ctx, s.opts.CredentialsJSON, params)
	}
	from := "Application Default Credentials"
	if f := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"); f != "" {
		from += " (GOOGLE_APPLICATION_CREDENTIALS=" + f + ")"
	}
	creds, err := google.FindDefaultCredentialsWithParams(ctx, params)
	if err != nil {
		return nil, from, err
	}
	if len(creds.JSON) == 0 {
		return creds, from + ": the metadata server", nil
	}
	return creds, from + ": " + describe(creds.JSON), nil
}

// trusted are the credential types fromJSON builds.
var trusted = map[string]google.CredentialsType{
	string(google.ServiceAccount):             google.ServiceAccount,
	string(google.ExternalAccount):            google.ExternalAccount,
	string(google.ImpersonatedServiceAccount): google.ImpersonatedServiceAccount,
	string(google.AuthorizedUser):             google.AuthorizedUser,
}

func fromJSON(ctx context.Context, data []byte, params google.CredentialsParams) (*google.Credentials, string, error) {
	from := describe(data)
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, from, errors.New("gke: the credentials are not JSON")
	}
	typ, ok := trusted[f.Type]
	if !ok {
		return nil, from, errors.New("gke: credentials of an unsupported type")
	}
	creds, err := google.CredentialsFromJSONWithTypeAndParams(ctx, data, typ, params)
	return creds, from, err
}

// describe names the identity of a credentials file by fields that are no
// secret: the service account's e-mail, the external account's audience.
func describe(data []byte) string {
	var f struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		Audience    string `json:"audience"`
		Impersonate string `json:"service_account_impersonation_url"`
	}
	if json.Unmarshal(data, &f) != nil {
		return "credentials that are not JSON"
	}
	switch f.Type {
	case "service_account":
		return "service account key " + quote(f.ClientEmail)
	case "external_account":
		return "external account " + quote(f.Audience)
	case "impersonated_service_account":
		return "impersonated service account " + quote(f.Impersonate)
	case "authorized_user":
		return "authorized user credentials"
	default:
		return "credentials of type " + quote(f.Type)
	}
}

// quote bounds and quotes a field read from a credentials file.
func quote(s string) string {
	const max = 200
	if len(s) > max {
		s = s[:max] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}
