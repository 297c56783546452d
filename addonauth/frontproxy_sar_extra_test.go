package addonauth

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"

	"github.com/authvault/authvault/testkit/testpki"
)

// sarRecorder is an API server that records the SubjectAccessReviews it
// is asked, and passes everything to the fake.
type sarRecorder struct {
	mu    sync.Mutex
	specs []authzv1.SubjectAccessReviewSpec
}

func recordSARs(t *testing.T, api *fakeAPI) (*sarRecorder, *httptest.Server) {
	rec := &sarRecorder{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/authorization.k8s.io/v1/subjectaccessreviews" {
			body, _ := io.ReadAll(r.Body)
			var sar authzv1.SubjectAccessReview
			_ = json.Unmarshal(body, &sar)
			rec.mu.Lock()
			rec.specs = append(rec.specs, sar.Spec)
			rec.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		api.serve(w, r)
	}))
	t.Cleanup(srv.Close)
	return rec, srv
}

// The SubjectAccessReview asks about the caller the API server
// authenticated, extras included: an authorizer that reads them (scopes
// that narrow a token, as OpenShift's; the node or pod a credential is
// bound to) must see them, as kube-rbac-proxy and k8s.io/apiserver's
// delegated authorizer send them. User.Extra is now filled from a front
// proxy and from TokenReview, and the review leaves it out.
func TestAuthorizationReviewCarriesTheCallersExtra(t *testing.T) {
	proxyCA := testpki.NewCA(t)
	api := newFakeAPI(t)
	rec, srv := recordSARs(t, api)
	api.allowed["alice get /hello"] = true
	api.allowed["carol get /hello"] = true
	s := &frontSetup{api: api, up: &recorder{}, ca: testpki.NewCA(t)}
	cfg := api.config()
	cfg.Host = srv.URL
	cfg.TLSClientConfig.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	a, err := New(Options{Audience: audience, Config: cfg, Authorization: &Authorization{}, ReviewForeign: true,
		FrontProxy: &FrontProxy{ClientCAFile: writeCA(t, proxyCA.PEM), UIDHeaders: []string{"X-Remote-Uid"}}})
	if err != nil {
		t.Fatal(err)
	}
	s.auth = a
	s.srv = httptest.NewUnstartedServer(a.Middleware(s.up))
	s.srv.TLS = s.ca.ServerTLS(t, "addon-proxy", nil)
	s.srv.TLS.ClientAuth = tls.RequestClientCert
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)

	resp, body := s.get(t, s.client(t, proxyCA, "front-proxy-client"), http.Header{
		"X-Remote-User": {"alice"}, "X-Remote-Uid": {"uid-alice"}, "X-Remote-Group": {"devs"},
		"X-Remote-Extra-Scopes.authorization.openshift.io": {"user:info"},
	})
	if resp.StatusCode != 200 {
		t.Fatalf("front-proxy GET = %d %q", resp.StatusCode, body)
	}
	tok := "opaque-carol-token"
	api.accept(tok, authnv1.UserInfo{Username: "carol", Groups: []string{"devs"},
		Extra: map[string]authnv1.ExtraValue{"scopes.authorization.openshift.io": {"user:info"}}})
	resp, body = s.get(t, s.client(t, nil, ""), http.Header{"Authorization": {"Bearer " + tok}})
	if resp.StatusCode != 200 {
		t.Fatalf("bearer GET = %d %q", resp.StatusCode, body)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.specs) != 2 {
		t.Fatalf("%d reviews, want 2", len(rec.specs))
	}
	for _, spec := range rec.specs {
		if got := spec.Extra["scopes.authorization.openshift.io"]; len(got) != 1 || got[0] != "user:info" {
			t.Errorf("the review of %s carries extra %v, want its scopes: an authorizer that narrows by them allows it all", spec.User, spec.Extra)
		}
	}
}
