package addonauth

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
)

// With Authorization, a verified caller also needs the API server's
// permission; answers are cached, so a busy caller costs one review per
// TTL.
func TestAuthorizationBySubjectAccessReview(t *testing.T) {
	s := newSetup(t, Options{Authorization: &Authorization{AllowTTL: time.Hour, DenyTTL: time.Hour}})
	allowed := s.api.token(t, "team-a", "reader", audience, time.Hour)
	denied := s.api.token(t, "team-a", "stranger", audience, time.Hour)
	s.api.allowed["system:serviceaccount:team-a:reader get /hello"] = true
	for range 5 {
		if resp, _ := s.get(t, allowed, nil); resp.StatusCode != 200 {
			t.Fatalf("allowed caller = %d, want 200", resp.StatusCode)
		}
		if resp, _ := s.get(t, denied, nil); resp.StatusCode != 403 {
			t.Fatalf("denied caller = %d, want 403", resp.StatusCode)
		}
	}
	if n := s.api.accessReviews.Load(); n != 2 {
		t.Errorf("%d SubjectAccessReviews for 10 requests of 2 callers, want 2 (cached)", n)
	}
	if s.up.count() != 5 {
		t.Errorf("%d requests reached the upstream, want the 5 allowed", s.up.count())
	}
}

func TestAuthorizationOfResourceAttributes(t *testing.T) {
	s := newSetup(t, Options{Authorization: &Authorization{Resource: &authzv1.ResourceAttributes{Namespace: "monitoring", Resource: "services", Subresource: "proxy"}}})
	tok := s.api.token(t, "team-a", "scraper", audience, time.Hour)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 403 {
		t.Fatalf("before the grant = %d, want 403", resp.StatusCode)
	}
	s2 := newSetup(t, Options{Authorization: &Authorization{Resource: &authzv1.ResourceAttributes{Namespace: "monitoring", Resource: "services", Subresource: "proxy"}}})
	tok2 := s2.api.token(t, "team-a", "scraper", audience, time.Hour)
	s2.api.allowed["system:serviceaccount:team-a:scraper get services/proxy monitoring"] = true
	if resp, _ := s2.get(t, tok2, nil); resp.StatusCode != 200 {
		t.Errorf("with the grant = %d, want 200 (the verb taken from the request)", resp.StatusCode)
	}
}

// An API server that cannot answer gives 503, never a cached denial.
func TestAuthorizationUnavailable(t *testing.T) {
	s := newSetup(t, Options{NoReview: true, Authorization: &Authorization{}})
	tok := s.api.token(t, "team-a", "reader", audience, time.Hour)
	s.api.allowed["system:serviceaccount:team-a:reader get /hello"] = true
	s.get(t, tok, nil) // keys fetched
	s.api.setDown(true)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
		t.Errorf("cached permission while down = %d, want 200", resp.StatusCode)
	}
	s3 := newSetup(t, Options{NoReview: true, Authorization: &Authorization{}})
	tok3 := s3.api.token(t, "team-a", "reader", audience, time.Hour)
	s3.get(t, s3.api.token(t, "team-a", "warm", audience, time.Hour), nil) // keys fetched
	s3.api.setDown(true)
	if resp, _ := s3.get(t, tok3, nil); resp.StatusCode != 503 {
		t.Errorf("no answer from the API server = %d, want 503", resp.StatusCode)
	}
}

// A path with dot segments is not what the upstream serves once it cleans
// it: /public/../admin must not pass for a caller allowed only /public/*.
func TestAuthorizationOfAnUncleanPath(t *testing.T) {
	s := newSetup(t, Options{Authorization: &Authorization{}})
	tok := s.api.token(t, "team-a", "reader", audience, time.Hour)
	s.api.allowed["system:serviceaccount:team-a:reader get /public/*"] = true
	for _, p := range []string{"/public/../admin", "/public/%2e%2e/admin", "/public/..%2fadmin", "/public//../admin"} {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("GET %s = %d, want 403", p, resp.StatusCode)
		}
	}
	if s.up.count() != 0 {
		t.Errorf("%d requests with dot segments reached the upstream", s.up.count())
	}
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 403 {
		t.Errorf("GET /hello = %d, want 403", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/public/a/", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /public/a/ = %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
}

// The rate limit comes before the SubjectAccessReview: a caller over its
// rate costs the API server nothing (distinct paths, so no answer is
// cached).
func TestRateLimitComesBeforeAuthorization(t *testing.T) {
	s := newSetup(t, Options{RatePerUser: 1, BurstPerUser: 1, Authorization: &Authorization{}})
	tok := s.api.token(t, "team-a", "reader", audience, time.Hour)
	s.api.allowed["system:serviceaccount:team-a:reader get /public/*"] = true
	codes := map[int]int{}
	for i := range 50 {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/public/"+strconv.Itoa(i), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[200] < 1 || codes[200]+codes[429] != 50 {
		t.Fatalf("codes = %v, want 200s then 429s", codes)
	}
	if got, want := s.api.accessReviews.Load(), int64(codes[200]); got != want {
		t.Errorf("%d SubjectAccessReviews for %d forwarded and %d limited requests, want %d: one per forwarded request", got, codes[200], codes[429], want)
	}
}

// The SubjectAccessReview checks the request's method: a request that asks
// the upstream to take it as another method (frameworks honour these
// headers and a _method parameter) is refused, so a caller allowed only
// get cannot delete with a GET that says DELETE.
func TestAuthorizationRefusesMethodOverrides(t *testing.T) {
	s := newSetup(t, Options{Authorization: &Authorization{}})
	tok := s.api.token(t, "team-a", "reader", audience, time.Hour)
	s.api.allowed["system:serviceaccount:team-a:reader get /hello"] = true
	s.api.allowed["system:serviceaccount:team-a:reader get /hello/*"] = true
	for _, h := range []http.Header{
		{"X-Http-Method-Override": {"DELETE"}},
		{"X-Http-Method": {"DELETE"}},
		{"X-Method-Override": {"DELETE"}},
		{"x-http-method-override": {"delete"}},
		{"X_HTTP_Method_Override": {"DELETE"}},
		{"X-Http-Method-Override": {""}},
	} {
		if resp, _ := s.get(t, tok, h); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET with %v = %d, want 403", h, resp.StatusCode)
		}
	}
	for _, q := range []string{"?_method=DELETE", "?a=1&_method=delete", "?_METHOD=DELETE"} {
		if got := rawGet(t, s.srv.Listener.Addr().String(), "/hello"+q, http.Header{"Authorization": {"Bearer " + tok}}); got != http.StatusForbidden {
			t.Errorf("GET /hello%s = %d, want 403", q, got)
		}
	}
	if n := s.up.count(); n != 0 {
		t.Errorf("%d requests with a method override reached the upstream", n)
	}
	if resp, _ := s.get(t, tok, http.Header{"X-Http-Method-Overridden": {"x"}}); resp.StatusCode != 200 {
		t.Errorf("GET with an unrelated header = %d, want 200", resp.StatusCode)
	}
	if got := rawGet(t, s.srv.Listener.Addr().String(), "/hello/x?method=DELETE&x_method=1", http.Header{"Authorization": {"Bearer " + tok}}); got != 200 {
		t.Errorf("GET with unrelated parameters = %d, want 200", got)
	}

	// A verb that does not come from the request leaves nothing to override;
	// without authorization the method is the upstream's business.
	for name, opts := range map[string]Options{
		"fixed verb": {Authorization: &Authorization{Resource: &authzv1.ResourceAttributes{Verb: "get", Namespace: "monitoring", Resource: "services", Subresource: "proxy"}}},
		"no authz":   {},
	} {
		s := newSetup(t, opts)
		tok := s.api.token(t, "team-a", "scraper", audience, time.Hour)
		s.api.allowed["system:serviceaccount:team-a:scraper get services/proxy monitoring"] = true
		if resp, _ := s.get(t, tok, http.Header{"X-Http-Method-Override": {"DELETE"}}); resp.StatusCode != 200 {
			t.Errorf("%s: GET with an override = %d, want 200", name, resp.StatusCode)
		}
	}
}

// A _method parameter counts however PHP spells it, since Laravel and
// Symfony take the override from PHP's parsed query: PHP drops leading
// spaces from a name, reads "." and " " in it as "_", ends it at a NUL,
// and makes "_method[...]" an array named _method. ?.method=DELETE was a
// DELETE to Laravel behind a review of GET.
func TestAuthorizationRefusesMethodOverridesAsPHPReadsThem(t *testing.T) {
	s := newSetup(t, Options{Authorization: &Authorization{}})
	tok := s.api.token(t, "team-a", "reader", audience, time.Hour)
	s.api.allowed["system:serviceaccount:team-a:reader get /hello"] = true
	addr, bearer := s.srv.Listener.Addr().String(), http.Header{"Authorization": {"Bearer " + tok}}
	for _, q := range []string{
		"?.method=DELETE", "?%2Emethod=DELETE", "?+_method=DELETE", "?%20_method=DELETE", "?++.method=DELETE",
		"?_method%00x=DELETE", "?%2Emethod%00%zz=DELETE", "?_method[]=DELETE", "?_method%5B0%5D=DELETE", "?a=1&_method.=x&.METHOD=DELETE",
	} {
		if got := rawGet(t, addr, "/hello"+q, bearer); got != http.StatusForbidden {
			t.Errorf("GET /hello%s = %d, want 403", q, got)
		}
	}
	if n := s.up.count(); n != 0 {
		t.Errorf("%d requests with a method override reached the upstream", n)
	}
	// Names PHP reads as another: not overrides.
	for _, q := range []string{"?_method_=x", "?x.method=DELETE", "?_meth.od=DELETE", "?__method=DELETE", "?_method%zz=x", "?%_method=x"} {
		if got := rawGet(t, addr, "/hello"+q, bearer); got != 200 {
			t.Errorf("GET /hello%s = %d, want 200", q, got)
		}
	}
}

// A hung API server costs the SubjectAccessReviews one timeout, as it does
// the TokenReviews: the paths (or users) whose decision has lapsed or was
// never made get 503 at once, not each after ReviewTimeout, and no review
// reaches the hung server until the retry period has passed.
func TestHungAccessReviewsAreWaitedForOnce(t *testing.T) {
	const timeout = 2 * time.Second
	clk := newManualClock()
	s := newSetup(t, Options{NoReview: true, ReviewTimeout: timeout, Authorization: &Authorization{}, now: clk.now})
	tok := s.api.token(t, "team-a", "reader", audience, 2*time.Hour)
	for i := range 6 {
		s.api.allowed[fmt.Sprintf("system:serviceaccount:team-a:reader get /p%d", i)] = true
	}
	if resp, _ := s.getPath(t, tok, "/p0"); resp.StatusCode != 200 {
		t.Fatalf("first GET = %d", resp.StatusCode)
	}
	s.api.setHung(true)
	defer s.api.setHung(false)
	if resp, _ := s.getPath(t, tok, "/p1"); resp.StatusCode != 503 {
		t.Fatalf("a review that timed out = %d, want 503", resp.StatusCode)
	}
	before := s.api.accessReviews.Load()
	for i := 2; i < 6; i++ {
		start := time.Now()
		resp, _ := s.getPath(t, tok, fmt.Sprintf("/p%d", i))
		if took := time.Since(start); took >= timeout {
			t.Errorf("/p%d took %v, want no wait for the review timeout (%v)", i, took, timeout)
		}
		if resp.StatusCode != 503 {
			t.Errorf("/p%d = %d, want 503", i, resp.StatusCode)
		}
	}
	if resp, _ := s.getPath(t, tok, "/p0"); resp.StatusCode != 200 {
		t.Errorf("a cached permission during the outage = %d, want 200", resp.StatusCode)
	}
	if got := s.api.accessReviews.Load() - before; got != 0 {
		t.Errorf("%d SubjectAccessReviews reached the hung API server after one timed out, want 0", got)
	}
	s.api.setHung(false)
	clk.advance(s.auth.authz.backend.retry)
	if resp, _ := s.getPath(t, tok, "/p5"); resp.StatusCode != 200 {
		t.Errorf("after the outage = %d, want 200", resp.StatusCode)
	}
}

// A 400 to a SubjectAccessReview answers that question (403), and is not
// an outage: the next caller's review goes through.
func TestABadAccessReviewIsADenialNotAnOutage(t *testing.T) {
	s := newSetup(t, Options{NoReview: true, Authorization: &Authorization{}})
	tok := s.api.token(t, "team-a", "reader", audience, time.Hour)
	s.api.allowed["system:serviceaccount:team-a:reader get /hello"] = true
	if resp, _ := s.getPath(t, tok, "/invalid"); resp.StatusCode != 403 {
		t.Errorf("a question the API server finds invalid = %d, want 403", resp.StatusCode)
	}
	if resp, _ := s.getPath(t, tok, "/hello"); resp.StatusCode != 200 {
		t.Errorf("the next caller = %d, want 200: the 400 opened the circuit", resp.StatusCode)
	}
}
