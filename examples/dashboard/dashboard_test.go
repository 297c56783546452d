package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDashboard is the dashboard with the caller read from addon-proxy's
// headers as they arrive, as if its middleware had verified them: the
// middleware itself is tested in package addonauth and, in front of the
// dashboard, in the integration tests.
func testDashboard() *dashboard {
	d := newDashboard()
	d.caller = func(r *http.Request) (identity, bool) {
		user := r.Header.Get(headerUser)
		return identity{User: user, UID: r.Header.Get(headerUID), Groups: r.Header.Values(headerGroups)}, user != ""
	}
	return d
}

// as is a request to the dashboard from user (none: "") in groups, as
// addon-proxy forwards it.
func as(method, target, user string, groups []string, form url.Values) *http.Request {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if user != "" {
		r.Header.Set(headerUser, user)
		r.Header.Set(headerUID, "uid-"+user)
	}
	for _, g := range groups {
		r.Header.Add(headerGroups, g)
	}
	return r
}

// serve runs r through d and returns the response and its body.
func serve(t *testing.T, d http.Handler, r *http.Request) (*http.Response, string) {
	t.Helper()
	w := httptest.NewRecorder()
	d.ServeHTTP(w, r)
	resp := w.Result()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// post adds a note as user and returns the response.
func post(t *testing.T, d http.Handler, user, text string) (*http.Response, string) {
	t.Helper()
	return serve(t, d, as(http.MethodPost, "/notes", user, nil, url.Values{"text": {text}}))
}

// The page names the caller and their groups, from addon-proxy's headers.
func TestPageShowsTheIdentity(t *testing.T) {
	tests := []struct {
		name   string
		groups []string
		want   []string
	}{
		{"alice", []string{"system:authenticated", "devs"}, []string{
			`signed in as <strong id="user">alice</strong> (groups <span id="groups">system:authenticated, devs</span>)`,
			`uid <span id="uid">uid-alice</span>`,
		}},
		{"bob", nil, []string{`signed in as <strong id="user">bob</strong> (no groups<span id="groups"></span>)`}},
	}
	for _, tt := range tests {
		resp, body := serve(t, testDashboard(), as(http.MethodGet, "/notes", tt.name, tt.groups, nil))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /notes as %s: %d %s", tt.name, resp.StatusCode, body)
		}
		if got, want := resp.Header.Get("Content-Type"), "text/html; charset=utf-8"; got != want {
			t.Errorf("GET /notes as %s: Content-Type %q, want %q", tt.name, got, want)
		}
		for _, want := range tt.want {
			if !strings.Contains(body, want) {
				t.Errorf("GET /notes as %s: the page does not contain %q:\n%s", tt.name, want, body)
			}
		}
	}
}

// A name, a group or a note is text on the page, never markup.
func TestPageEscapes(t *testing.T) {
	d := testDashboard()
	const evil = `<script>alert("x")</script>`
	if resp, body := post(t, d, evil, evil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /notes: %d %s", resp.StatusCode, body)
	}
	_, body := serve(t, d, as(http.MethodGet, "/notes", evil, []string{evil}, nil))
	if strings.Contains(body, "<script") {
		t.Errorf("the page holds a <script> element:\n%s", body)
	}
	for _, want := range []string{
		`<strong id="user">&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</strong>`,
		`<span id="groups">&lt;script&gt;`,
		`<li>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;: &lt;script&gt;`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not contain %q:\n%s", want, body)
		}
	}
}

// A request without X-Authenticated-User did not come through addon-proxy:
// 401, whatever it asks for but the health check.
func TestNoIdentityIsRefused(t *testing.T) {
	d := testDashboard()
	for _, r := range []*http.Request{
		as(http.MethodGet, "/notes", "", nil, nil),
		as(http.MethodGet, "/notes", "", []string{"system:masters"}, nil), // groups alone are no identity
		as(http.MethodPost, "/notes", "", nil, url.Values{"text": {"hi"}}),
	} {
		resp, body := serve(t, d, r)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "must run behind addon-proxy") {
			t.Errorf("%s %s without %s: %d %q, want 401 saying it must run behind addon-proxy", r.Method, r.URL, headerUser, resp.StatusCode, body)
		}
	}
	if _, body := serve(t, d, as(http.MethodGet, "/notes", "alice", nil, nil)); strings.Contains(body, "<li>") {
		t.Errorf("a refused POST kept a note:\n%s", body)
	}
	resp, body := serve(t, d, as(http.MethodGet, "/healthz", "", nil, nil))
	if resp.StatusCode != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz without identity: %d %q, want 200 \"ok\\n\"", resp.StatusCode, body)
	}
}

// A note is kept under the name of who posted it, and the answer is 303 to
// /, an absolute path (addon-proxy puts it under its prefix); everyone sees
// it.
func TestNoteIsKeptWithItsAuthor(t *testing.T) {
	d := testDashboard()
	resp, body := post(t, d, "alice", "the cluster is upgraded")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /notes: %d %s, want 303", resp.StatusCode, body)
	}
	if got, want := resp.Header.Get("Location"), "/notes"; got != want {
		t.Errorf("POST /notes: Location %q, want %q", got, want)
	}
	post(t, d, "bob", "thanks")
	_, body = serve(t, d, as(http.MethodGet, "/notes", "carol", nil, nil))
	want := "<ul id=\"notes\">\n<li>alice: the cluster is upgraded</li>\n<li>bob: thanks</li>\n</ul>"
	if !strings.Contains(body, want) {
		t.Errorf("carol's page does not list the notes oldest first, each with its author, as %q:\n%s", want, body)
	}
}

// The form posts to the relative URL notes: under /apis/GROUP/VERSION/ it
// posts to /apis/GROUP/VERSION/notes.
func TestFormPostsToARelativeURL(t *testing.T) {
	_, body := serve(t, testDashboard(), as(http.MethodGet, "/notes", "alice", nil, nil))
	for _, want := range []string{`<form id="add" method="post" action="notes">`, `<input id="text" name="text"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not contain %q:\n%s", want, body)
		}
	}
}

// A note is 1 KiB at most and not blank; the last 100 are kept.
func TestBounds(t *testing.T) {
	d := testDashboard()
	tests := []struct {
		text string
		want int
	}{
		{strings.Repeat("a", maxText), http.StatusSeeOther},
		{strings.Repeat("é", maxText/2), http.StatusSeeOther}, // 1 KiB of UTF-8, 3 KiB encoded
		{strings.Repeat("a", maxText+1), http.StatusBadRequest},
		{strings.Repeat("é", maxText/2) + "a", http.StatusBadRequest},
		{strings.Repeat("\x00", maxBody/3+1), http.StatusRequestEntityTooLarge}, // %00 each: past the form's bound
		{"", http.StatusBadRequest},
		{" \n\t", http.StatusBadRequest},
	}
	for _, tt := range tests {
		if resp, body := post(t, d, "alice", tt.text); resp.StatusCode != tt.want {
			t.Errorf("POST /notes with a text of %d bytes: %d %q, want %d", len(tt.text), resp.StatusCode, body, tt.want)
		}
	}

	d = testDashboard()
	for i := range maxNotes + 5 {
		if resp, body := post(t, d, "alice", fmt.Sprintf("note %d", i)); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST /notes %d: %d %s", i, resp.StatusCode, body)
		}
	}
	_, body := serve(t, d, as(http.MethodGet, "/notes", "alice", nil, nil))
	if got := strings.Count(body, "<li>"); got != maxNotes {
		t.Errorf("the page lists %d notes, want the last %d", got, maxNotes)
	}
	for _, gone := range []string{"note 0<", "note 4<"} {
		if strings.Contains(body, gone) {
			t.Errorf("the page still lists %q, one of the oldest five", strings.TrimSuffix(gone, "<"))
		}
	}
	for _, kept := range []string{"<li>alice: note 5</li>", fmt.Sprintf("<li>alice: note %d</li>", maxNotes+4)} {
		if !strings.Contains(body, kept) {
			t.Errorf("the page does not list %q", kept)
		}
	}
}

// Only the page, the form's target and the health check are served, each
// with its method; every answer tells caches and other sites to keep off.
func TestRoutes(t *testing.T) {
	d := testDashboard()
	tests := []struct {
		method, target string
		want           int
	}{
		{http.MethodGet, "/", http.StatusOK},
		{http.MethodHead, "/", http.StatusOK},
		{http.MethodGet, "/notes", http.StatusOK},
		{http.MethodDelete, "/notes", http.StatusMethodNotAllowed},
		{http.MethodPost, "/", http.StatusMethodNotAllowed},
		{http.MethodGet, "/other", http.StatusNotFound},
		{http.MethodGet, "/healthz", http.StatusOK},
	}
	for _, tt := range tests {
		resp, _ := serve(t, d, as(tt.method, tt.target, "alice", nil, nil))
		if resp.StatusCode != tt.want {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.target, resp.StatusCode, tt.want)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s: Cache-Control %q, want no-store", tt.method, tt.target, got)
		}
		if got := resp.Header.Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") {
			t.Errorf("%s %s: Content-Security-Policy %q, want frame-ancestors 'none'", tt.method, tt.target, got)
		}
	}
}
