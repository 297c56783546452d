package addonauth

import (
	"net/http"
	"testing"

	"golang.org/x/net/http/httpguts"
	authnv1 "k8s.io/api/authentication/v1"
)

// Extra keys are escaped into header names; the values a TokenReview
// returns are the API server's authenticator's (a webhook's, an OIDC
// claim's), and a forwarded header must still be one a server or a proxy
// accepts (values that are not are refused: see the next test).
func TestForwardedExtraHeadersAreValid(t *testing.T) {
	s := newSetup(t, Options{ReviewForeign: true})
	tok := "opaque-dave-token"
	s.api.accept(tok, authnv1.UserInfo{Username: "dave", Extra: map[string]authnv1.ExtraValue{
		"a b:c/d%e":     {"ok"},
		"é":             {"ok"},
		"multi\r\nline": {"v"}, // a key is escaped: CR and LF too
	}})
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/hello", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	h := s.up.seen[0]
	for name, values := range h {
		if !httpguts.ValidHeaderFieldName(name) {
			t.Errorf("header name %q is not a token", name)
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				t.Errorf("%s: value %q is not a valid field value: a ReverseProxy upstream answers 502, an in-process one sees CR/LF", name, v)
			}
		}
	}
	if v := h.Values("X-Authenticated-User"); len(v) != 1 || v[0] != "dave" {
		t.Errorf("X-Authenticated-User = %q", v)
	}
	if h.Get("X-Authenticated-Extra-A%20b%3Ac%2Fd%25e") != "ok" {
		t.Errorf("the escaped key is not as the aggregation layer escapes it: %v", h)
	}
}

// An identity the upstream would read as another (a value a transport
// trims or refuses) is refused, not forwarded in part.
func TestIdentityIsForwardedAsItIsOrNotAtAll(t *testing.T) {
	for _, info := range []authnv1.UserInfo{
		{Username: "mallory", Groups: []string{" system:masters"}}, // Header.Write trims it to system:masters
		{Username: "admin ", Groups: []string{"devs"}},
		{Username: "mallory", Groups: []string{"devs\t"}},
		{Username: "mallory", Extra: map[string]authnv1.ExtraValue{"scopes.example.com": {"read-only", "x\r\n"}}},
		{Username: "mallory\r\nX-Authenticated-Groups: system:masters"},
		{Username: "mallory", UID: "nul\x00"},
	} {
		s := newSetup(t, Options{ReviewForeign: true})
		tok := "opaque-mallory-token"
		s.api.accept(tok, info)
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/hello", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || s.up.count() != 0 {
			t.Errorf("%+v: %d, the upstream reached %d times; want 403 and none", info, resp.StatusCode, s.up.count())
		}
	}
}
