package loginhttp

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A Recorder's Base is the login author's to choose, and its error may
// quote a URL with user info: a gateway's transport that names its proxy,
// or one that sends through an http.Client of its own, whose *url.Error
// keeps a user name (a token, in https://TOKEN@host) and hides only a
// password. Neither the Exchange nor Failure's text may carry them, and
// both still say where the request failed.
func TestTransportErrorHidesUserInfo(t *testing.T) {
	const secret = "s3cret-gw-token"
	inner := &http.Client{Transport: &http.Transport{}}
	defer inner.CloseIdleConnections()
	for _, tc := range []struct {
		name  string
		base  http.RoundTripper
		where string
	}{
		{"a gateway that names its proxy", roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, fmt.Errorf("egress gateway: proxy http://gw:%s@gateway.example:3128 refused the connection", secret)
		}), "gateway.example:3128"},
		{"an http.Client of its own", roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := inner.Post("http://"+secret+"@127.0.0.1:1/relay", "text/plain", strings.NewReader("x"))
			if err == nil {
				resp.Body.Close()
				return nil, fmt.Errorf("the relay answered")
			}
			return nil, fmt.Errorf("relay: %w", err)
		}), "127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Recorder{Base: tc.base}
			_, err := (&http.Client{Transport: r}).Post("https://login.example/token", "application/x-www-form-urlencoded", strings.NewReader("a=b"))
			if err == nil || !strings.Contains(err.Error(), secret) {
				t.Fatalf("the case is not the one under test: the transport's error %v does not quote the secret", err)
			}
			ex, sent := r.Last()
			if !sent || ex.Err == "" {
				t.Fatalf("the exchange: %+v (sent %v)", ex, sent)
			}
			text, _, _ := Failure(context.Background(), r, err)
			for what, s := range map[string]string{"Exchange.Err": ex.Err, "Exchange.String": ex.String(), "Failure": text} {
				if strings.Contains(s, secret) {
					t.Errorf("%s carries the secret: %q", what, s)
				}
				if !strings.Contains(s, tc.where) {
					t.Errorf("%s no longer says where: %q", what, s)
				}
			}
		})
	}
}
