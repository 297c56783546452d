package gke

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/login/loginhttp"
	"github.com/authvault/authvault/redact"
)

// rejections are the STS error codes that say the pool provider refused
// the hub's token: invalid_grant (its signature, issuer, audience or
// expiry), unauthorized_client (the provider's attribute condition, such
// as one on the subject), access_denied, and invalid_target (no such
// provider, or one disabled: nothing trusts the hub's issuer there).
var rejections = map[string]bool{"invalid_grant": true, "unauthorized_client": true, "access_denied": true, "invalid_target": true}

// failed is a failed exchange as the federation login gets it: the member,
// the provider and service account, the request that failed and what
// Google said of it, never a secret. A refusal of the hub's token wraps
// federation.ErrRejected; another 4xx is permanent; the rest (no answer,
// 5xx, 408, 429) is worth retrying.
func (f *federated) failed(ctx context.Context, rec *loginhttp.Recorder, a *answers, member federation.Member, token federation.Token, err error) error {
	text, cause, permanent := loginhttp.Failure(ctx, rec, err)
	ex, sent := rec.Last()
	last, refused := a.refusal()
	if cause == nil && sent && ex.Failed() && refused {
		if !last.sts {
			// Not the URL, whose path holds the service account's email:
			// an error's text is scanned for URL user info, and the part
			// before an @ is hidden.
			text = fmt.Sprintf("POST %s generateAccessToken: HTTP %d", bareURL(f.opts.IAMCredentialsURL), last.status)
		}
		if !strings.Contains(text, " "+last.code) && last.code != "" {
			text += " " + last.code // a Google API's status, such as PERMISSION_DENIED
		}
		if last.said != "" {
			text += ": " + strconv.Quote(last.said)
		}
		switch {
		case last.sts && rejections[last.code] && permanent:
			cause = federation.ErrRejected
			permanent = false // federation.Login makes a rejection permanent for the round, and says why
		case !last.sts && last.status == http.StatusForbidden:
			// The hub's token was taken: what is missing is a grant.
			text += "; the pool's principal for the hub's ServiceAccount needs roles/iam.workloadIdentityUser on service account " + quote(f.opts.ServiceAccount)
		}
	}
	e := &Error{Server: redact.URL(member.Server), Credentials: f.from(), What: redact.Mask(text, token.Value()), cause: cause}
	if permanent {
		return login.Permanent(e)
	}
	return e
}

// answers is the transport under a Recorder that reads what a failed
// answer says: the OAuth2 error and error_description of an STS answer,
// the status and message of a Google API's, with every secret the request
// carried masked.
type answers struct {
	sts     string   // the STS endpoint, as bareURL gives it
	secrets []string // masked in what an answer says: the hub's token

	mu   sync.Mutex // guards last, ok
	last refusal    // of the last failed answer
	ok   bool       // the last answer failed
}

// refusal is what a failed answer said.
type refusal struct {
	sts    bool   // to the exchange, not the impersonation
	status int    // its HTTP status
	code   string // the OAuth2 error, or the Google API error's status
	said   string // its description, masked, on one line, bounded
}

// refusal returns what the last answer said, if it failed.
func (a *answers) refusal() (refusal, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last, a.ok
}

func (a *answers) RoundTrip(req *http.Request) (*http.Response, error) {
	secrets := append([]string{req.Header.Get("Authorization")}, a.secrets...)
	if _, bearer, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok {
		secrets = append(secrets, bearer) // the federated token, at the impersonation
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	r, failed := refusal{sts: bareURL(req.URL.String()) == a.sts, status: resp.StatusCode}, resp.StatusCode >= 400
	if failed {
		r.code, r.said = said(resp, secrets)
	}
	a.mu.Lock()
	a.last, a.ok = r, failed
	a.mu.Unlock()
	return resp, nil
}

// maxSaid bounds a description, in bytes.
const maxSaid = 300

// shortWord is what an error code may be.
var shortWord = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,64}$`)

// tokenLike are runs that look like a token: a JWT (or a piece of one),
// and a Google access token. Masked in a description even when no known
// secret matches them, as an endpoint may quote a token it cut or
// re-encoded.
var tokenLike = regexp.MustCompile(`eyJ[A-Za-z0-9_\-]{6,}(\.[A-Za-z0-9_\-]*)*|ya29\.[A-Za-z0-9_\-.]+`)

// said reads resp's error code and description, puts its body back, and
// returns the description masked, on one line and bounded.
func said(resp *http.Response, secrets []string) (code, description string) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", ""
	}
	var e struct {
		Error       json.RawMessage `json:"error"`
		Description string          `json:"error_description"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	var api struct { // a Google API's error: {"error": {"code", "message", "status"}}
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	if json.Unmarshal(e.Error, &code) != nil && json.Unmarshal(e.Error, &api) == nil {
		code, e.Description = api.Status, api.Message
	}
	if !shortWord.MatchString(code) {
		code = ""
	}
	d := tokenLike.ReplaceAllString(redact.Mask(e.Description, secrets...), redact.Marker)
	d = strings.Join(strings.FieldsFunc(d, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }), " ")
	if len(d) > maxSaid {
		d = strings.ToValidUTF8(d[:maxSaid], "") + "…"
	}
	return code, redact.URL(d)
}

// bareURL is s's scheme, host and path.
func bareURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
