package addonauth

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
	authnv1 "k8s.io/api/authentication/v1"
)

// waitFor polls cond until it holds, a hang's worth of time at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, cond)
}

// A hung API server (SIGSTOP) costs no request the review timeout: the
// review at the onset goes on in the background while its caller is served
// its stale verdict (StaleWait); once it times out, the next requests
// answer at once (a token reviewed recently 200 from its stale verdict, a
// new one 503) and do not reach the API server; once the retry period has
// passed, one probe at a time does, the others still answered at once.
func TestHungReviewsAreWaitedForOnce(t *testing.T) {
	const timeout = 3 * time.Second
	clk := newManualClock()
	s := newSetup(t, Options{SuccessTTL: 10 * time.Second, StaleIfError: time.Hour, ReviewTimeout: timeout, now: clk.now})
	seen := s.api.token(t, "team-a", "seen", audience, 2*time.Hour)
	unseen := s.api.token(t, "team-a", "unseen", audience, 2*time.Hour)
	if resp, _ := s.get(t, seen, nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	s.api.setHung(true)
	clk.advance(11 * time.Second) // the verdict has lapsed
	reviews := s.api.reviews.Load()
	if resp, _ := s.get(t, seen, nil); resp.StatusCode != 200 {
		t.Fatalf("seen token at the hang's onset = %d, want 200 (stale)", resp.StatusCode)
	}
	waitFor(t, "the review to time out in the background", func() bool {
		return s.api.reviews.Load() == reviews+1 && s.auth.reviewer.inFlight() == 0
	})
	reviews++

	// quick checks that the next requests answer without waiting for the
	// API server, and with what.
	quick := func(stage string) {
		t.Helper()
		for i := range 10 {
			tok, want := seen, 200
			if i%2 == 1 {
				tok, want = unseen, 503
			}
			start := time.Now()
			resp, _ := s.get(t, tok, nil)
			if took := time.Since(start); took >= timeout {
				t.Errorf("%s: request %d took %v, want no wait for the review timeout (%v)", stage, i, took, timeout)
			}
			if resp.StatusCode != want {
				t.Errorf("%s: request %d = %d, want %d", stage, i, resp.StatusCode, want)
			}
		}
	}
	quick("after the timeout")
	if got := s.api.reviews.Load() - reviews; got != 0 {
		t.Errorf("%d TokenReviews reached the hung API server after the first timed out, want 0", got)
	}

	clk.advance(s.auth.reviewer.backend.retry)
	probe := make(chan int)
	go func() {
		resp, _ := s.get(t, seen, nil)
		probe <- resp.StatusCode
	}()
	waitFor(t, "the probe to reach the API server", func() bool { return s.api.reviews.Load() == reviews+1 })
	quick("during the probe")
	if s.auth.reviewer.inFlight() != 1 {
		// The quick requests took longer than the probe's timeout, or
		// some waited for it.
		t.Error("the probe's review ended before the requests made during it: they waited for it")
	}
	if code := <-probe; code != 200 {
		t.Errorf("the probe's own request = %d, want 200 (stale)", code)
	}
	if got := s.api.reviews.Load() - reviews; got != 1 {
		t.Errorf("%d TokenReviews reached the hung API server during a probe, want 1 (the probe)", got)
	}

	// Back: reviews resume once a probe finds the API server answering.
	s.api.setHung(false)
	waitFor(t, "a new token to be served after the recovery", func() bool {
		clk.advance(s.auth.reviewer.backend.retry)
		resp, _ := s.get(t, unseen, nil)
		return resp.StatusCode == 200
	})
	before := s.api.reviews.Load()
	if resp, _ := s.get(t, s.api.token(t, "team-a", "third", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Errorf("another new token after the recovery = %d, want 200", resp.StatusCode)
	}
	if got := s.api.reviews.Load() - before; got != 1 {
		t.Errorf("%d TokenReviews for a new token after the recovery, want 1", got)
	}
}

// An API server that answers errors is not asked again for the retry
// period: one failure, not one per request; then one probe, and reviews
// resume when it succeeds.
func TestFailingReviewsAreRetriedAfterAPause(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{SuccessTTL: 10 * time.Second, StaleIfError: time.Hour, now: clk.now})
	seen := s.api.token(t, "team-a", "seen", audience, 2*time.Hour)
	if resp, _ := s.get(t, seen, nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	s.api.setDown(true)
	clk.advance(11 * time.Second)
	reviews := s.api.reviews.Load()
	for i := range 20 {
		tok, want := seen, 200
		if i%2 == 1 {
			tok, want = s.api.token(t, "team-a", "new", audience, time.Hour), 503
		}
		if resp, _ := s.get(t, tok, nil); resp.StatusCode != want {
			t.Errorf("request %d while down = %d, want %d", i, resp.StatusCode, want)
		}
	}
	if got := s.api.reviews.Load() - reviews; got != 1 {
		t.Errorf("%d TokenReviews for 20 requests within the retry period, want 1", got)
	}
	clk.advance(s.auth.reviewer.backend.retry)
	s.get(t, seen, nil)
	s.get(t, seen, nil)
	if got := s.api.reviews.Load() - reviews; got != 2 {
		t.Errorf("%d TokenReviews after the retry period, want 2 (one probe)", got)
	}
	s.api.setDown(false)
	fresh := s.api.token(t, "team-a", "fresh", audience, time.Hour)
	if resp, _ := s.get(t, fresh, nil); resp.StatusCode != 503 {
		t.Errorf("new token before the retry period ends = %d, want 503", resp.StatusCode)
	}
	clk.advance(s.auth.reviewer.backend.retry)
	if resp, _ := s.get(t, fresh, nil); resp.StatusCode != 200 {
		t.Errorf("new token after the recovery = %d, want 200", resp.StatusCode)
	}
}

// A denial is an answer: it does not make the API server count as failing.
func TestDenialsDoNotOpenTheCircuit(t *testing.T) {
	s := newSetup(t, Options{})
	bad := s.api.token(t, "team-a", "revoked", audience, time.Hour)
	s.api.revoke(bad)
	if resp, _ := s.get(t, bad, nil); resp.StatusCode != 401 {
		t.Fatalf("revoked token = %d, want 401", resp.StatusCode)
	}
	if resp, _ := s.get(t, s.api.token(t, "team-a", "good", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Errorf("good token after a denial = %d, want 200", resp.StatusCode)
	}
}

// The key fetch remembers a failure too: while the API server is hung
// with no key set fetched, one fetch at a time waits for it; others are
// answered at once.
func TestHungKeyFetchIsWaitedForOnce(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{KeyRefetchInterval: 10 * time.Second, now: clk.now})
	s.auth.keys.timeout = time.Second
	s.api.setHung(true)
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	if _, err := s.auth.Authenticate(context.Background(), tok); !errors.Is(err, errUnavailable) {
		t.Fatalf("Authenticate with a hung API server = %v, want %v", err, errUnavailable)
	}
	clk.advance(time.Second) // the pause after a failed first fetch
	fetches := s.api.discoveries.Load()
	probe := make(chan error)
	go func() {
		_, err := s.auth.Authenticate(context.Background(), tok)
		probe <- err
	}()
	waitFor(t, "the probe fetch", func() bool { return s.api.discoveries.Load() > fetches })
	for i := range 5 {
		start := time.Now()
		_, err := s.auth.Authenticate(context.Background(), tok)
		if took := time.Since(start); took >= time.Second || !errors.Is(err, errUnavailable) {
			t.Errorf("call %d during the probe: %v after %v, want %v at once", i, err, took, errUnavailable)
		}
	}
	if err := <-probe; !errors.Is(err, errUnavailable) {
		t.Errorf("the probe = %v, want %v", err, errUnavailable)
	}
	s.api.setHung(false)
	clk.advance(time.Second)
	if _, err := s.auth.Authenticate(context.Background(), tok); err != nil {
		t.Errorf("Authenticate after the recovery = %v", err)
	}
}

// An outage is logged once when it starts and once when it ends, never an
// error (logr's Error makes zap print a stack), not once per request; the
// detail of each refused request is at V(1).
func TestOutageIsLoggedOncePerChange(t *testing.T) {
	for _, v := range []int{0, 1} {
		var logs testlog.Buffer
		clk := newManualClock()
		api := newFakeAPI(t)
		a, err := New(Options{Audience: audience, Config: api.config(), Logger: logs.Logger(v), now: clk.now})
		if err != nil {
			t.Fatal(err)
		}
		s := &setup{api: api, auth: a, up: &recorder{}, srv: httptest.NewServer(a.Middleware(&recorder{})), logs: &bytes.Buffer{}}
		t.Cleanup(s.srv.Close)
		tok := api.token(t, "team-a", "client", audience, time.Hour)
		if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 { // the keys are in
			t.Fatal("first GET refused")
		}
		api.setDown(true)
		var tokens []string
		for i := range 20 {
			clk.advance(a.reviewer.backend.retry) // each request a probe: the most a log could say
			tokens = append(tokens, api.token(t, "team-a", "new", audience, time.Hour))
			if resp, _ := s.get(t, tokens[i], nil); resp.StatusCode != 503 {
				t.Fatalf("request %d while down = %d, want 503", i, resp.StatusCode)
			}
		}
		api.setDown(false)
		clk.advance(a.reviewer.backend.retry)
		if resp, _ := s.get(t, api.token(t, "team-a", "after", audience, time.Hour), nil); resp.StatusCode != 200 {
			t.Fatal("GET after the outage refused")
		}
		out := logs.String()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var levelled, errs int
		for _, l := range lines {
			if strings.Contains(l, `"level"=0`) {
				levelled++
			}
			if !strings.Contains(l, `"level"=`) {
				errs++ // funcr gives Error lines no level
			}
		}
		if v == 0 && (len(lines) != 2 || levelled != 2) {
			t.Errorf("V(0): %d lines (%d at level 0) for an outage and its end, want 2:\n%s", len(lines), levelled, out)
		}
		if v == 1 && len(lines) < 20 {
			t.Errorf("V(1): %d lines, want each of the 20 refused requests:\n%s", len(lines), out)
		}
		if errs != 0 {
			t.Errorf("V(%d): %d lines logged as errors, want none:\n%s", v, errs, out)
		}
		for _, tok := range append(tokens, tok) {
			if strings.Contains(out, tok[len(tok)-20:]) {
				t.Errorf("V(%d): the log holds a token", v)
				break
			}
		}
	}
}

// A token the API server would not review as it is given never reaches a
// TokenReview, even with ReviewForeign. An empty one ("Bearer \u00a0"
// leaves none once trimmed) is a 400, which counted as an outage: one such
// request a second kept every new caller at 503. One with a space is
// reviewed up to the space, so "<token> x" was accepted as the token
// without its local checks: nothing bounded it by its exp.
func TestTokensTheAPIServerWouldReadOtherwiseAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token func(tok string) string // of a good token
		// header: sent as "Authorization: Bearer <token>"; else given
		// to Authenticate.
		header bool
	}{
		{"only a non-breaking space", func(string) string { return "\u00a0" }, true},
		{"a space and more", func(tok string) string { return tok + " x" }, true},
		{"a space inside", func(tok string) string { return tok[:10] + " " + tok[10:] }, true},
		{"a NEL inside", func(tok string) string { return tok + "\u0085x" }, true},
		{"empty", func(string) string { return "" }, false},
		{"only whitespace", func(string) string { return " \t\u00a0" }, false},
		{"a trailing space", func(tok string) string { return tok + " " }, false},
		{"a leading space", func(tok string) string { return " " + tok }, false},
		{"a trailing NBSP", func(tok string) string { return tok + "\u00a0" }, false},
		{"a tab inside", func(tok string) string { return tok[:10] + "\t" + tok[10:] }, false},
		{"an opaque one with a space", func(string) string { return "opaque token" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t, Options{ReviewForeign: true})
			tok := s.api.token(t, "team-a", "client", audience, time.Hour)
			s.api.accept("opaque", authnv1.UserInfo{Username: "alice"})
			if tc.header {
				if resp, _ := s.get(t, "", http.Header{"Authorization": {"Bearer " + tc.token(tok)}}); resp.StatusCode != 401 {
					t.Errorf("GET = %d, want 401", resp.StatusCode)
				}
			} else if _, err := s.auth.Authenticate(context.Background(), tc.token(tok)); err == nil || errors.Is(err, errUnavailable) {
				t.Errorf("Authenticate = %v, want a refusal", err)
			}
			if got := s.api.reviews.Load(); got != 0 {
				t.Errorf("%d TokenReviews, want 0", got)
			}
			if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
				t.Errorf("a good token after it = %d, want 200", resp.StatusCode)
			}
			if up := s.up.count(); up != 1 {
				t.Errorf("%d requests reached the upstream, want 1", up)
			}
		})
	}
}

// A 400 for a TokenReview is the API server's answer about that token,
// not an outage: the token is refused, and the others' reviews go on.
func TestABadRequestIsADenialNotAnOutage(t *testing.T) {
	s := newSetup(t, Options{})
	// Past authenticate's checks, as a token some later API server
	// finds malformed would be.
	_, err := s.auth.reviewer.review(context.Background(), "", User{})
	if !errors.Is(err, errReviewDenied) {
		t.Errorf("review of a token the API server calls a bad request = %v, want %v", err, errReviewDenied)
	}
	if err := s.auth.reviewer.backend.holding(); err != nil {
		t.Errorf("after a 400 the circuit holds: %v", err)
	}
	if resp, _ := s.get(t, s.api.token(t, "team-a", "good", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Errorf("a good token after a 400 = %d, want 200", resp.StatusCode)
	}
}

// With ReviewForeign, a review of a token the local check did not vouch
// for may fail for that token's sake (the webhook or identity provider
// the API server asks about it hangs) while the API server answers the
// others: such a failure refuses that caller, and opens the circuit for
// nobody. One garbage token a second kept every new caller at 503.
func TestAForeignTokensFailedReviewDoesNotOpenTheCircuit(t *testing.T) {
	s := newSetup(t, Options{ReviewForeign: true, ReviewTimeout: 200 * time.Millisecond})
	s.api.hangOn("webhook-token")
	if resp, _ := s.get(t, "webhook-token", nil); resp.StatusCode != 503 {
		t.Errorf("a token whose review timed out = %d, want 503", resp.StatusCode)
	}
	if resp, _ := s.get(t, s.api.token(t, "team-a", "good", audience, time.Hour), nil); resp.StatusCode != 200 {
		t.Errorf("a good token right after = %d, want 200", resp.StatusCode)
	}
	// A failing API server still opens it for everyone, foreign tokens too.
	s.api.setDown(true)
	if resp, _ := s.get(t, s.api.token(t, "team-a", "new", audience, time.Hour), nil); resp.StatusCode != 503 {
		t.Errorf("a new token while the API server is down = %d, want 503", resp.StatusCode)
	}
	reviews := s.api.reviews.Load()
	if resp, _ := s.get(t, "another-webhook-token", nil); resp.StatusCode != 503 {
		t.Errorf("a foreign token while the circuit is open = %d, want 503", resp.StatusCode)
	}
	if got := s.api.reviews.Load() - reviews; got != 0 {
		t.Errorf("%d TokenReviews while the circuit is open, want 0", got)
	}
}

// A long request's recheck of a foreign token blames its failure on the
// API server no more than the first review did.
func TestAForeignStreamsFailedRecheckDoesNotOpenTheCircuit(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{ReviewForeign: true, SuccessTTL: time.Hour, ReviewTimeout: 200 * time.Millisecond, now: clk.now})
	s.api.accept("webhook-token", authnv1.UserInfo{Username: "alice"})
	u, err := s.auth.Authenticate(context.Background(), "webhook-token")
	if err != nil {
		t.Fatal(err)
	}
	ctx, w, stop := s.auth.bound(context.Background(), "Bearer webhook-token", u, httptest.NewRecorder())
	defer stop()
	s.api.hangOn("webhook-token")
	clk.advance(2 * time.Hour) // the verdict has lapsed: the check asks
	boundOf(t, w).review()
	if ctx.Err() == nil {
		t.Error("the stream outlived a recheck that could not vouch for its token")
	}
	if err := s.auth.reviewer.backend.holding(); err != nil {
		t.Errorf("after a foreign token's recheck timed out the circuit holds: %v", err)
	}
}
