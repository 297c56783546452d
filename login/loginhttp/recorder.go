package loginhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/authvault/authvault/redact"
)

// Recorder is an http.RoundTripper (and, through Do, an Azure SDK
// policy.Transporter) that sends every request with Ctx, through Base, and
// notes the last exchange. A Recorder serves one login attempt: it is safe
// for concurrent use, but Last is the last exchange of all its requests. The
// zero Recorder sends through http.DefaultTransport with each request's own
// context.
type Recorder struct {
	// Base sends the requests. Nil: http.DefaultTransport.
	Base http.RoundTripper
	// Ctx, when set, replaces each request's context: SDKs that build a
	// request without one (oauth2's JWT flow) are then canceled with the
	// login.
	Ctx context.Context

	mu   sync.Mutex // guards last, seen
	last Exchange
	seen bool
}

// Exchange is what a Recorder noted of one request: nothing secret.
type Exchange struct {
	Method string
	URL    string // scheme, host and path: no user info, query or fragment
	Status int    // 0: no response
	Code   string // the OAuth2 "error" of a failed response, when a short word
	Err    string // the transport's error, when no response came; URL user info hidden
}

// Failed tells whether the exchange failed: no response, or a status of 400
// or above.
func (e Exchange) Failed() bool { return e.Status == 0 || e.Status >= 400 }

// String is the exchange as a login's error may say it: "POST
// https://login.example/oauth2/token: HTTP 400 invalid_grant", or the
// transport's error when no response came.
func (e Exchange) String() string {
	s := e.Method + " " + e.URL
	switch {
	case e.Status == 0:
		return s + ": " + e.Err
	case e.Code != "":
		return fmt.Sprintf("%s: HTTP %d %s", s, e.Status, e.Code)
	default:
		return fmt.Sprintf("%s: HTTP %d", s, e.Status)
	}
}

// Last returns the last exchange, and false when no request was sent.
func (r *Recorder) Last() (Exchange, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.seen
}

// Do sends req: the azcore policy.Transporter method.
func (r *Recorder) Do(req *http.Request) (*http.Response, error) { return r.RoundTrip(req) }

// RoundTrip sends req with r.Ctx and notes the exchange.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.Ctx != nil {
		req = req.WithContext(r.Ctx)
	}
	base := r.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	ex := Exchange{Method: req.Method, URL: bareURL(req.URL)}
	if err != nil {
		ex.Err = transportError(err)
	} else {
		ex = Response(resp)
	}
	r.mu.Lock()
	r.last, r.seen = ex, true
	r.mu.Unlock()
	return resp, err
}

// Response is what can be told of resp, a response to a token request:
// its request's method and URL, its status and, for a failure, its OAuth2
// error code. It reads at most 64 KiB of a failed response's body and puts
// them back.
func Response(resp *http.Response) Exchange {
	ex := Exchange{Status: resp.StatusCode}
	if req := resp.Request; req != nil {
		ex.Method, ex.URL = req.Method, bareURL(req.URL)
	}
	if resp.StatusCode >= 400 && resp.Body != nil {
		ex.Code = oauthCode(resp)
	}
	return ex
}

func bareURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	b := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return b.String()
}

// transportError is the text of a transport's failure, without the URL a
// *url.Error would add, and with the user info of every URL it quotes
// hidden: a Base may wrap an error that quotes one (a proxy's URL, an inner
// http.Client's *url.Error, which keeps a user name).
func transportError(err error) string {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	return redact.URL(err.Error())
}

// maxErrorBody bounds what oauthCode reads of a failed response.
const maxErrorBody = 64 << 10

var shortWord = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,64}$`)

// oauthCode reads the "error" of an OAuth2 error response (and Entra ID's
// "error_codes"), and puts the body back for the SDK.
func oauthCode(resp *http.Response) string {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	var e struct {
		Error any     `json:"error"`
		Codes []int64 `json:"error_codes"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	code, _ := e.Error.(string)
	if !shortWord.MatchString(code) {
		return ""
	}
	if len(e.Codes) > 0 && len(e.Codes) <= 4 {
		var ids []string
		for _, c := range e.Codes {
			ids = append(ids, fmt.Sprintf("AADSTS%d", c))
		}
		code += " (" + strings.Join(ids, ", ") + ")"
	}
	return code
}
