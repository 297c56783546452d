package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// --trusted-origins is compared with the browser's Origin as a string: a
// spelling no browser sends (upper case, the default port) is taken and
// then never matches, so the page it meant is refused with nothing said.
// Either it is normalized, or refused with the flag's name.
func TestTrustedOriginsAreTheBrowsersSpelling(t *testing.T) {
	for _, c := range []struct{ flag, origin string }{
		{"HTTP://LocalHost:8001", "http://localhost:8001"},
		{"https://dash.example.com:443", "https://dash.example.com"},
		{"http://localhost:80", "http://localhost"},
	} {
		cfg, err := parse("--audience", "a", "--trusted-origins", c.flag)
		if err != nil {
			if !strings.Contains(err.Error(), "--trusted-origins") {
				t.Errorf("%s: %v does not name the flag", c.flag, err)
			}
			continue
		}
		req := httptest.NewRequest("POST", "http://addon/notes", nil)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", c.origin)
		w := httptest.NewRecorder()
		originGuarded(t, cfg, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Errorf("--trusted-origins %s was accepted, yet a page of %s is refused: %d %s", c.flag, c.origin, w.Code, w.Body)
		}
	}
	if _, err := parse("--audience", "a", "--trusted-origins", "http://localhost:8001/"); err == nil {
		t.Error("a trailing slash was accepted")
	}
}
