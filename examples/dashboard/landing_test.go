package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The root is the group-version's root through the API server, which every
// authenticated user may GET: it shows no note, no author and nothing of
// the caller's, only the way to the notes, which RBAC guards.
func TestRootHoldsNothingPrivate(t *testing.T) {
	d := testDashboard()
	if resp, body := post(t, d, "alice", "the secret plan"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /notes: %d %s", resp.StatusCode, body)
	}
	resp, body := serve(t, d, as(http.MethodGet, "/", "carol", []string{"system:authenticated"}, nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d %s", resp.StatusCode, body)
	}
	for _, leak := range []string{"secret plan", "alice", "carol", `id="notes"`, "<form"} {
		if strings.Contains(body, leak) {
			t.Errorf("GET / holds %q:\n%s", leak, body)
		}
	}
	if !strings.Contains(body, `<a id="notes-link" href="notes">`) {
		t.Errorf("GET / has no relative link to notes:\n%s", body)
	}
}

// An empty list says so; one with a note does not.
func TestEmptyNotesSaySo(t *testing.T) {
	d := testDashboard()
	_, body := serve(t, d, as(http.MethodGet, "/notes", "alice", nil, nil))
	if !strings.Contains(body, `<p id="empty">No notes yet`) {
		t.Errorf("an empty list says nothing:\n%s", body)
	}
	post(t, d, "alice", "first")
	if _, body = serve(t, d, as(http.MethodGet, "/notes", "alice", nil, nil)); strings.Contains(body, `id="empty"`) {
		t.Errorf("a list with a note says it is empty:\n%s", body)
	}
}

// A WebSocket at /notes gets the notes kept, then each one added, and ends
// when the dashboard stops; one without addon-proxy's identity gets 401
// and no upgrade.
func TestWatchSendsTheNotesAsTheyCome(t *testing.T) {
	d := testDashboard()
	post(t, d, "alice", "before")
	srv := httptest.NewServer(d)
	defer srv.Close()
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/notes?watch=1"

	if _, resp, err := websocket.DefaultDialer.Dial(wsURL, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a handshake without identity: %v %v, want 401", err, resp)
	}
	conn, _, err := websocket.DefaultDialer.Dial(wsURL, http.Header{headerUser: {"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	read := func() note {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a hang, not the machine's speed
		var n note
		if err := conn.ReadJSON(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := read(); got != (note{"alice", "before"}) {
		t.Errorf("first message %+v, want alice's note kept", got)
	}
	post(t, d, "carol", "after")
	if got := read(); got != (note{"carol", "after"}) {
		t.Errorf("second message %+v, want carol's new note", got)
	}
	d.stop()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, _, err := conn.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Errorf("after stop: %v, want a close (going away)", err)
	}
}

// One person may not take every WebSocket: past their own bound they get
// 503, and another person is still served.
func TestOneUserCannotTakeEveryWatcher(t *testing.T) {
	d := testDashboard()
	srv := httptest.NewServer(d)
	defer srv.Close()
	defer d.stop()
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/notes?watch=1"
	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range maxWatchers {
		c, _, err := websocket.DefaultDialer.Dial(wsURL, http.Header{headerUser: {"mallory"}})
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	if len(conns) != maxWatchersPerUser {
		t.Errorf("mallory opened %d WebSockets, want %d at most", len(conns), maxWatchersPerUser)
	}
	c, resp, err := websocket.DefaultDialer.Dial(wsURL, http.Header{headerUser: {"bob"}})
	if err != nil {
		t.Fatalf("bob's watch after mallory's: %v %v, want it served", err, resp)
	}
	c.Close()
}

// A handshake without ?watch=1 was authorized as list, not watch: 400.
func TestWatchNeedsTheWatchParameter(t *testing.T) {
	d := testDashboard()
	srv := httptest.NewServer(d)
	defer srv.Close()
	defer d.stop()
	c, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/notes", http.Header{headerUser: {"bob"}})
	if err == nil {
		c.Close()
		t.Fatal("a WebSocket at /notes without ?watch=1 (RBAC: list) was opened")
	}
	if resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("without ?watch=1: %v, want 400", resp)
	}
}
