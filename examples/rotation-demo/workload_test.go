package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// authLayer stands for client-go's exec round tripper or the vault: it
// waits before sending (a plugin run), and sends the request again after
// a wait when the first answer is a 401 (the vault's replay).
type authLayer struct {
	before, replay time.Duration
	next           http.RoundTripper
}

func (a authLayer) RoundTrip(req *http.Request) (*http.Response, error) {
	time.Sleep(a.before)
	resp, err := a.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	time.Sleep(a.replay)
	again := req.Clone(req.Context())
	again.Header.Set("X-Replay", "1")
	return a.next.RoundTrip(again)
}

// TestTraceCountsTheAuthLayerNotTheServer: the wait is the time in the
// layer above net/http, before sending and between a 401 and its replay,
// whatever the server takes.
func TestTraceCountsTheAuthLayerNotTheServer(t *testing.T) {
	// The server's second per answer is what a wait that counted it would
	// show: far more than what a busy machine adds to a sleep.
	const serverDelay = time.Second
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(serverDelay)
		if r.URL.Query().Get("reject") != "" && r.Header.Get("X-Replay") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name           string
		before, replay time.Duration
		path           string
		wantMin        time.Duration
	}{
		{"fast layer, slow server", 0, 0, "/", 0},
		{"waits before sending", 200 * time.Millisecond, 0, "/", 200 * time.Millisecond},
		{"replays a 401 after a wait", 0, 200 * time.Millisecond, "/?reject=1", 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := &http.Client{Transport: metered{authLayer{before: tc.before, replay: tc.replay, next: srv.Client().Transport}}}
			tr, ctx := traced(t.Context())
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took, wait := tr.end()
			// The server's time (a second per answer) is never a wait;
			// half of it is slack for a busy machine.
			if slack := serverDelay / 2; wait < tc.wantMin || wait > tc.wantMin+slack {
				t.Errorf("wait = %v, want %v (+%v at most); took %v", wait, tc.wantMin, slack, took)
			}
			if took < tc.wantMin+serverDelay {
				t.Errorf("took = %v, want at least %v", took, tc.wantMin+serverDelay)
			}
		})
	}
}

// TestSlowestBreaksAtGaps: a bucket in which no request started ends a
// stretch of the line, and each point is its bucket's slowest request.
func TestSlowestBreaksAtGaps(t *testing.T) {
	ms := time.Millisecond
	samples := []sample{
		{at: 10 * ms, took: 5 * ms},
		{at: 50 * ms, took: 9 * ms},
		{at: 150 * ms, took: 7 * ms},
		{at: 550 * ms, took: 1200 * ms}, // after 3 empty buckets
	}
	got := slowest(samples)
	if len(got) != 2 {
		t.Fatalf("got %d stretches, want 2: %v", len(got), got)
	}
	if len(got[0]) != 2 || got[0][0].Y != 9 || got[0][1].Y != 7 {
		t.Errorf("first stretch = %v, want the buckets at 0 s (9 ms) and 0.1 s (7 ms)", got[0])
	}
	if len(got[1]) != 1 || got[1][0].X != 0.5 || got[1][0].Y != 1200 {
		t.Errorf("second stretch = %v, want one point at 0.5 s, 1200 ms", got[1])
	}
}
