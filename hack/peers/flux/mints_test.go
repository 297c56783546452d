package flux_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// mints records the TokenRequests a side sends to the hub: the
// ServiceAccount and the audiences of each, "namespace/name for a,b".
type mints struct {
	mu   sync.Mutex // guards seen
	seen []string
}

// config is a copy of base whose requests go through m.
func (m *mints) config(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			sa, ok := tokenRequestFor(req)
			if !ok {
				return rt.RoundTrip(req)
			}
			body, err := io.ReadAll(req.Body)
			req.Body.Close()
			if err != nil {
				return nil, err
			}
			var tr authenticationv1.TokenRequest
			if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, &tr); err != nil {
				return nil, fmt.Errorf("reading a TokenRequest (%s): %w", req.Header.Get("Content-Type"), err)
			}
			m.mu.Lock()
			m.seen = append(m.seen, sa+" for "+strings.Join(tr.Spec.Audiences, ","))
			m.mu.Unlock()
			req.Body = io.NopCloser(bytes.NewReader(body))
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

// total is how many TokenRequests m recorded.
func (m *mints) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.seen)
}

// distinct is what m recorded, each once, in order.
func (m *mints) distinct() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, s := range m.seen {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, "; ")
}

// tokenRequestFor tells whether req creates a token, and for which
// ServiceAccount: POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token.
func tokenRequestFor(req *http.Request) (string, bool) {
	p := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if req.Method != http.MethodPost || len(p) != 7 || p[2] != "namespaces" || p[4] != "serviceaccounts" || p[6] != "token" {
		return "", false
	}
	return p[3] + "/" + p[5], true
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
