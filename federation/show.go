package federation

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/authvault/authvault/redact"
)

// show GETs /version of cfg's server (a config with no credential of its
// own) with token as the request's one credential, follows no redirect,
// and returns the answer's status: 401 says the server does not take the
// token; any other answer of an API server comes after authentication.
// An API server lets every authenticated user read /version.
func show(ctx context.Context, cfg *rest.Config, token string) (code int, status string, err error) {
	shared, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, "", fmt.Errorf("the TLS settings: %w", redact.Error(err))
	}
	// A copy: for a config with nothing of its own, client-go hands out
	// http.DefaultClient itself, which this must not change.
	client := *shared
	defer client.CloseIdleConnections()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/version", nil)
	if err != nil {
		return 0, "", fmt.Errorf("the address: %w", redact.Error(err))
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", redact.Secrets(err, token)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, resp.Status, nil
}
