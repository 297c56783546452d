package addonauth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A caller whose token has a stale verdict (older than SuccessTTL, within
// StaleIfError) waits for its review only StaleWait when the API server
// hangs: it is served from that verdict while the review goes on, one per
// token however many callers carry it. A revocation the review brings
// back later still ends the token's access.
func TestStaleCallersDoNotWaitOutAHungReview(t *testing.T) {
	// A review timeout no answer of this test may come near: an answer
	// before the hung API server is released did not wait for it.
	const reviewTimeout = 5 * time.Minute
	clk := newManualClock()
	s := newSetup(t, Options{SuccessTTL: 10 * time.Second, StaleIfError: time.Hour, ReviewTimeout: reviewTimeout, now: clk.now})
	t.Cleanup(func() { s.api.setHung(false) }) // first: the server's Close waits for the callers
	seen := s.api.token(t, "team-a", "seen", audience, 2*time.Hour)
	if resp, _ := s.get(t, seen, nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	s.api.setHung(true)
	clk.advance(11 * time.Second) // the verdict has lapsed
	reviews := s.api.reviews.Load()

	const callers = 10
	answers := make(chan int, callers)
	for range callers {
		go func() {
			resp, _ := s.get(t, seen, nil)
			answers <- resp.StatusCode
		}()
	}
	for i := range callers {
		select {
		case code := <-answers:
			if code != 200 {
				t.Errorf("caller %d with a stale verdict = %d, want 200", i, code)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d callers with a stale verdict still wait 30 s into the hang (ReviewTimeout %v): they wait out the review", callers-i, callers, reviewTimeout)
		}
	}
	if got := s.api.reviews.Load() - reviews; got != 1 {
		t.Errorf("%d TokenReviews for %d callers of one token, want 1", got, callers)
	}
	if v, ok := s.auth.reviewer.cache.Get(s.auth.reviewer.keyOf(seen)); !ok || v.(*reviewed).err != nil {
		t.Fatal("the stale verdict left the cache while its review hangs")
	}

	// The review was still in flight: the API server answers it now, with
	// the token revoked meanwhile. Its answer replaces the stale verdict.
	s.api.revoke(seen)
	s.api.setHung(false)
	waitFor(t, "the background review's refusal to reach the cache", func() bool {
		v, ok := s.auth.reviewer.cached(seen)
		return ok && v.err != nil
	})
	if resp, _ := s.get(t, seen, nil); resp.StatusCode != 401 {
		t.Errorf("the token after its background review found it revoked = %d, want 401", resp.StatusCode)
	}
	if got := s.api.reviews.Load() - reviews; got != 1 {
		t.Errorf("%d TokenReviews, want 1: the refusal came from the background review", got)
	}
}

// A healthy API server answers within StaleWait: a revocation is seen by
// the first request after the verdict lapses, not served stale once.
func TestStaleWaitSeesARevocationAtOnce(t *testing.T) {
	clk := newManualClock()
	// StaleWait is far longer than any answer of the fake: the test does
	// not depend on the machine's speed.
	s := newSetup(t, Options{SuccessTTL: 10 * time.Second, StaleIfError: time.Hour, StaleWait: time.Minute, now: clk.now})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
		t.Fatal("first GET refused")
	}
	s.api.revoke(tok)
	clk.advance(11 * time.Second)
	if resp, _ := s.get(t, tok, nil); resp.StatusCode != 401 {
		t.Errorf("revoked token once its verdict lapsed = %d, want 401", resp.StatusCode)
	}
}

// During an outage a token without a verdict still gets 503 at once, and
// one with a stale verdict 200, neither reaching the API server; a
// negative StaleWait serves a stale verdict without waiting at all.
func TestNewTokensStillGet503DuringAHang(t *testing.T) {
	for _, wait := range []time.Duration{0, -1} {
		t.Run("StaleWait="+wait.String(), func(t *testing.T) {
			clk := newManualClock()
			s := newSetup(t, Options{SuccessTTL: 10 * time.Second, StaleIfError: time.Hour, ReviewTimeout: time.Second, StaleWait: wait, now: clk.now})
			seen := s.api.token(t, "team-a", "seen", audience, 2*time.Hour)
			unseen := s.api.token(t, "team-a", "unseen", audience, 2*time.Hour)
			if resp, _ := s.get(t, seen, nil); resp.StatusCode != 200 {
				t.Fatal("first GET refused")
			}
			s.api.setHung(true)
			clk.advance(11 * time.Second)
			if resp, _ := s.get(t, seen, nil); resp.StatusCode != 200 {
				t.Fatalf("stale token at the hang's onset = %d, want 200", resp.StatusCode)
			}
			// Its review times out in the background: reviews fail.
			waitFor(t, "the background review to time out", func() bool { return s.auth.reviewer.backend.holding() != nil })
			reviews := s.api.reviews.Load()
			if resp, _ := s.get(t, unseen, nil); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
				t.Errorf("new token during the hang = %d, want 503 with Retry-After", resp.StatusCode)
			}
			if resp, _ := s.get(t, seen, nil); resp.StatusCode != 200 {
				t.Errorf("stale token during the hang = %d, want 200", resp.StatusCode)
			}
			if got := s.api.reviews.Load() - reviews; got != 0 {
				t.Errorf("%d TokenReviews reached the hung API server once reviews failed, want 0", got)
			}
		})
	}
}

// A stream's periodic review is nobody's request: it waits for the
// review's answer (within ReviewTimeout) rather than StaleWait, so a
// revocation that a hung API server answers late still ends the stream
// at once.
func TestStreamRecheckWaitsForTheReviewNotStaleWait(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{SuccessTTL: 10 * time.Second, StaleIfError: time.Hour, ReviewTimeout: 5 * time.Minute, StaleWait: time.Millisecond, now: clk.now})
	tok := s.api.token(t, "team-a", "client", audience, time.Hour)
	local, _, err := s.auth.verifyLocal(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.auth.Authenticate(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	since := s.auth.reviewer.seq.Load()
	s.api.setHung(true)
	clk.advance(11 * time.Second)
	var wg sync.WaitGroup
	var recheckErr error
	wg.Go(func() { _, _, recheckErr = s.auth.reviewer.recheck(context.Background(), tok, local, since) })
	waitFor(t, "the recheck's review to reach the API server", func() bool { return s.api.reviews.Load() == 2 })
	s.api.revoke(tok)
	s.api.setHung(false)
	wg.Wait()
	if !errors.Is(recheckErr, errReviewDenied) {
		t.Errorf("recheck answered late by a revocation = %v, want %v", recheckErr, errReviewDenied)
	}
}

// Once a caller has stopped waiting for a review (past StaleWait), callers
// of other tokens with stale verdicts are served at once, their reviews
// going on, until a review answers: a hang costs the first callers
// StaleWait, not every token's. Then a healthy API server's answers are
// waited for again, so a revocation is seen at once.
func TestStaleCallersAreServedAtOnceWhileReviewsAreOverdue(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{SuccessTTL: 10 * time.Second, StaleIfError: time.Hour, ReviewTimeout: 5 * time.Minute, StaleWait: 5 * time.Minute, now: clk.now})
	t.Cleanup(func() { s.api.setHung(false) }) // first: the server's Close waits for the callers
	first := s.api.token(t, "team-a", "first", audience, 2*time.Hour)
	other := s.api.token(t, "team-a", "other", audience, 2*time.Hour)
	for _, tok := range []string{first, other} {
		if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
			t.Fatal("first GET refused")
		}
	}
	s.api.setHung(true)
	clk.advance(11 * time.Second)
	// As when a caller has just stopped waiting for first's review.
	answered := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a caller already gone: its review starts, and is left to run
		_, _ = s.auth.Authenticate(ctx, first)
	}()
	waitFor(t, "first's review to reach the API server", func() bool { return s.auth.reviewer.inFlight() == 1 })
	raise(&s.auth.reviewer.late, time.Since(s.auth.reviewer.epoch))
	go func() {
		resp, _ := s.get(t, other, nil)
		answered <- resp.StatusCode
	}()
	select {
	case code := <-answered:
		if code != 200 {
			t.Errorf("other token with a stale verdict while a review is overdue = %d, want 200", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a caller with a stale verdict still waits 30 s into the hang while another review is overdue (StaleWait 5 min)")
	}
	// The other token's review goes on too. Its goroutine may begin after
	// the caller was answered (the answer does not wait for it): wait for
	// it rather than look once.
	waitFor(t, "the other token's review to be under way beside first's", func() bool { return s.auth.reviewer.inFlight() == 2 })

	// The API server answers: reviews are waited for again.
	s.api.setHung(false)
	waitFor(t, "the reviews to end", func() bool { return s.auth.reviewer.inFlight() == 0 })
	if s.auth.reviewer.overdue(time.Now()) {
		t.Error("reviews still count as overdue after the API server answered")
	}
	s.api.revoke(other)
	clk.advance(11 * time.Second)
	if resp, _ := s.get(t, other, nil); resp.StatusCode != 401 {
		t.Errorf("revoked token once the API server answers again = %d, want 401", resp.StatusCode)
	}
}

// One review that hangs (a token that a hung webhook behind the API server
// must answer) while the API server answers the reviews begun after it
// does not keep reviews overdue: its callers, served at once, are no news
// of a hang, so another token's caller waits for its review again, and a
// revocation the API server answers at once is seen at once.
func TestOneHungReviewDoesNotHideARevocation(t *testing.T) {
	// Long enough that no answer of the fake comes near it; short enough
	// that the test waits it out once, by the real clock.
	const staleWait = 3 * time.Second
	clk := newManualClock()
	s := newSetup(t, Options{SuccessTTL: 10 * time.Second, StaleIfError: time.Hour, ReviewTimeout: 5 * time.Minute, StaleWait: staleWait, now: clk.now})
	hung := s.api.token(t, "team-a", "hung", audience, 2*time.Hour)
	healthy := s.api.token(t, "team-a", "healthy", audience, 2*time.Hour)
	revoked := s.api.token(t, "team-a", "revoked", audience, 2*time.Hour)
	for _, tok := range []string{hung, healthy, revoked} {
		if resp, _ := s.get(t, tok, nil); resp.StatusCode != 200 {
			t.Fatal("first GET refused")
		}
	}
	s.api.hangOn(hung)
	t.Cleanup(s.api.srv.CloseClientConnections) // ends the hung review, before the server's Close waits for it
	clk.advance(11 * time.Second)               // every verdict has lapsed

	// hung's review begins and hangs; its next caller, past StaleWait, is
	// served from its stale verdict: reviews are overdue.
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a caller already gone: its review starts, and is left to run
		_, _ = s.auth.Authenticate(ctx, hung)
	}()
	waitFor(t, "hung's review to reach the API server", func() bool { return s.auth.reviewer.inFlight() == 1 })
	time.Sleep(staleWait)
	if resp, _ := s.get(t, hung, nil); resp.StatusCode != 200 {
		t.Fatalf("hung token with a stale verdict = %d, want 200", resp.StatusCode)
	}
	// A review begun since answers: the API server is answering.
	if resp, _ := s.get(t, healthy, nil); resp.StatusCode != 200 {
		t.Fatalf("healthy token = %d, want 200", resp.StatusCode)
	}
	waitFor(t, "healthy's review to answer", func() bool {
		v, ok := s.auth.reviewer.cached(healthy)
		return ok && v.err == nil
	})
	// hung's callers go on being served at once from its hung review.
	if resp, _ := s.get(t, hung, nil); resp.StatusCode != 200 {
		t.Fatalf("hung token with a stale verdict = %d, want 200", resp.StatusCode)
	}

	s.api.revoke(revoked)
	if resp, _ := s.get(t, revoked, nil); resp.StatusCode != 401 {
		t.Errorf("revoked token, its review answered at once, while another token's review hangs = %d, want 401", resp.StatusCode)
	}
}
