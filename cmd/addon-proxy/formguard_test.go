package main

import (
	"bytes"
	"crypto/sha256"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
)

// bodyUpstream records the bodies it read to their end.
type bodyUpstream struct {
	mu     sync.Mutex
	bodies []string // read whole
	cut    int      // bodies that ended before their length
}

func (u *bodyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err != nil {
		u.cut++
		return
	}
	u.bodies = append(u.bodies, string(b))
}

func (u *bodyUpstream) whole() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

// A _method in a POST's form body, where Rails, Laravel, Symfony, Spring
// and Phoenix read it by default, is refused with 403 under --apiservice,
// urlencoded or multipart, with a length or chunked: the upstream never
// gets the whole body. Forms without one, and a _method anywhere but a
// field's name, reach it byte for byte.
func TestAPIServiceRefusesAMethodOverrideInAFormBody(t *testing.T) {
	up := &bodyUpstream{}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	u, _ := url.Parse(upSrv.URL)
	srv := httptest.NewServer(upstreamHandler(config{upstream: u, apiService: dashboard}, http.DefaultTransport, logr.Discard()))
	t.Cleanup(srv.Close)

	multi := func(fields ...string) (string, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for i := 0; i < len(fields); i += 2 {
			_ = mw.WriteField(fields[i], fields[i+1])
		}
		_ = mw.Close()
		return mw.FormDataContentType(), b.String()
	}
	const form = "application/x-www-form-urlencoded"
	big := strings.Repeat("x", 200<<10) // more than one read
	refused := []struct{ name, ctype, body string }{
		{"urlencoded", form, "text=x&_method=DELETE"},
		{"urlencoded, first", form, "_method=DELETE&text=x"},
		{"urlencoded, escaped", form, "text=x&%5Fmethod=DELETE"},
		{"urlencoded, PHP's spelling", form, "text=x&.method=DELETE"},
		{"urlencoded, an array", form, "_method[]=DELETE"},
		{"urlencoded, no value", form, "text=x&_method"},
		{"urlencoded, after a large field", form, "text=" + big + "&_method=DELETE"},
		{"urlencoded, ; separated", form + "; charset=utf-8", "text=x;_method=DELETE"},
	}
	ct, body := multi("text", "x", "_method", "DELETE")
	refused = append(refused, struct{ name, ctype, body string }{"multipart", ct, body})
	ct, body = multi("text", big, "_METHOD", "DELETE")
	refused = append(refused, struct{ name, ctype, body string }{"multipart, after a large part", ct, body})
	for _, chunked := range []bool{false, true} {
		for _, tc := range refused {
			before := len(up.whole())
			var r io.Reader = strings.NewReader(tc.body)
			if chunked {
				r = io.MultiReader(r) // no length: chunked
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/apis/dashboard.example.com/v1/notes", r)
			req.Header.Set("Content-Type", tc.ctype)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || len(up.whole()) != before || !strings.Contains(string(msg), "form body") {
				t.Errorf("%s (chunked %v): %d %q, the upstream read %d whole bodies; want 403 and none", tc.name, chunked, resp.StatusCode, msg, len(up.whole())-before)
			}
		}
	}

	ct, body = multi("text", big+"_method=DELETE", "note", "_method")
	for _, tc := range []struct{ name, ctype, body string }{
		{"urlencoded", form, "text=hello&x_method=1&_methods=2"},
		{"urlencoded, _method in a value", form, "text=_method%3DDELETE&a=_method"},
		{"urlencoded, large", form, "text=" + big},
		{"multipart, _method in values", ct, body},
		{"JSON", "application/json", `{"_method":"DELETE"}`},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/apis/dashboard.example.com/v1/notes", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := up.whole()
		if resp.StatusCode != 200 || len(got) == 0 || sha256.Sum256([]byte(got[len(got)-1])) != sha256.Sum256([]byte(tc.body)) {
			t.Errorf("%s: %d; want 200 and the body reaching the upstream as it was", tc.name, resp.StatusCode)
		}
	}
}
