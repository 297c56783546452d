package main

import (
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// The API server authorizes /apis/G/V/RESOURCE/NAME/SUBRESOURCE as that
// resource, reading ".." as a name like any other (it cleans no path);
// an upstream that resolves dot segments, as most web frameworks and Go's
// ServeMux do, serves another page than the one RBAC allowed:
// /apis/G/V/namespaces/ns/notes/.. is "get notes" to RBAC and
// /namespaces/ns to the app, which RBAC maps to "get namespaces". The
// middleware's own SubjectAccessReview refuses such paths (see
// Authorization); under the prefix they must not reach the app either.
func TestAPIServiceDotSegmentsDoNotReachTheUpstream(t *testing.T) {
	up := newPathUpstream(t)
	srv := httptest.NewServer(upstreamHandler(config{upstream: up.url, apiService: dashboard}, http.DefaultTransport, logr.Discard()))
	t.Cleanup(srv.Close)
	const prefix = "/apis/dashboard.example.com/v1"
	for _, target := range []string{
		prefix + "/namespaces/ns/notes/..",
		prefix + "/namespaces/ns/notes/%2e%2e",
		prefix + "/notes/x/../../admin",
		prefix + "/../../api/v1/secrets",
		prefix + "/notes/.",
		prefix + "%2Fnotes", // stripped to "%2Fnotes", forwarded as "/%2Fnotes": "//notes" to the app, "notes" to RBAC
	} {
		resp, _ := rawRequest(t, srv, "GET", target)
		if got := up.reached(); len(got) != 0 {
			t.Errorf("GET %s = %d: the upstream was asked %q, which it resolves to %q", target, resp.StatusCode, got, path.Clean(strings.ReplaceAll(got[0], "%2e", ".")))
		}
	}
}
