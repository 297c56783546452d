package loginhttp

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/authvault/authvault/redact"
)

// maxLocalText bounds the part of an SDK's own error that Failure keeps.
const maxLocalText = 300

// Failure says why a token request failed, in words safe to log, from
// what the login's context and Recorder saw rather than from err's text:
//
//   - the context ended: its error, which cause is, so errors.Is finds it;
//   - the last exchange failed: the exchange (method, URL, status, OAuth2
//     error code), permanent for a 4xx other than 408 and 429;
//   - the last exchange worked: the answer gave no usable token;
//   - nothing was sent: err's first line, URL user info hidden, for a local
//     failure (no credentials found, a key that does not parse). Such an
//     error quotes no response; it is permanent.
func Failure(ctx context.Context, r *Recorder, err error) (text string, cause error, permanent bool) {
	if cerr := ctx.Err(); cerr != nil {
		return cerr.Error(), cerr, false
	}
	if ex, sent := r.Last(); sent {
		if !ex.Failed() {
			return "the answer of " + ex.Method + " " + ex.URL + " gave no usable token", nil, false
		}
		return ex.String(), nil, PermanentStatus(ex.Status)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "canceled", err, false
	}
	text, _, _ = strings.Cut(redact.Error(err).Error(), "\n")
	if len(text) > maxLocalText {
		text = text[:maxLocalText] + "…"
	}
	return text, nil, true
}

// PermanentStatus tells whether a token endpoint's status says that asking
// again will not help: a 4xx other than 408 and 429.
func PermanentStatus(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}
