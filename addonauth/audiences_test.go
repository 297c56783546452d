package addonauth

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
)

// A service known by several names accepts a token meant for any of them:
// the local check takes any, and the TokenReview asks with all, as the
// API server's own --api-audiences.
func TestSeveralAudiences(t *testing.T) {
	api := newFakeAPI(t)
	var mu sync.Mutex
	var asked [][]string
	spy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/authentication.k8s.io/v1/tokenreviews" {
			b, _ := io.ReadAll(r.Body)
			var tr authnv1.TokenReview
			_ = json.Unmarshal(b, &tr)
			mu.Lock()
			asked = append(asked, tr.Spec.Audiences)
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		api.serve(w, r)
	}))
	defer spy.Close()
	cfg := &rest.Config{Host: spy.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"},
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: spy.Certificate().Raw})}}

	for name, opts := range map[string]Options{
		"Audience and Audiences": {Audience: "greeter.addons.svc", Audiences: []string{"greeter", "greeter.addons.svc"}},
		"Audiences only":         {Audiences: []string{"greeter.addons.svc", "greeter"}},
	} {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			asked = nil
			mu.Unlock()
			opts.Config = cfg
			a, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, aud := range []string{"greeter.addons.svc", "greeter"} {
				if _, err := a.Authenticate(t.Context(), api.token(t, "team-a", "client", aud, time.Hour)); err != nil {
					t.Errorf("a token for %q: %v, want accepted", aud, err)
				}
			}
			before := api.reviews.Load()
			if _, err := a.Authenticate(t.Context(), api.token(t, "team-a", "client", "other.svc", time.Hour)); err == nil {
				t.Error("a token for another service was accepted")
			}
			if api.reviews.Load() != before {
				t.Error("a token for another service cost a TokenReview")
			}
			mu.Lock()
			defer mu.Unlock()
			for _, got := range asked {
				if want := []string{"greeter.addons.svc", "greeter"}; !slices.Equal(got, want) {
					t.Errorf("TokenReview audiences = %q, want %q", got, want)
				}
			}
			if len(asked) != 2 {
				t.Errorf("%d TokenReviews, want 2", len(asked))
			}
		})
	}
	if _, err := New(Options{Audiences: []string{""}, Config: cfg}); err == nil {
		t.Error("New with an empty audience accepted it")
	}
}
