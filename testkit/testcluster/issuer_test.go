package testcluster

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// The issuer asks the AcceptFunc about the tokens it did not issue, and only
// about those: its own tokens, revoked or not, are its own to judge, and an
// outage fails every review before anyone is asked.
func TestSetAcceptDecidesOnOthersTokens(t *testing.T) {
	i := newIssuer(httptest.NewUnstartedServer(nil))
	good := i.Issue(0)
	revoked := i.Issue(0)
	i.Revoke(revoked)

	var asked []string
	i.SetAccept(func(tok string) (string, bool) {
		asked = append(asked, tok)
		return "arn:aws:sts::111122223333:assumed-role/admin/authvault", tok == "foreign-good"
	})
	for _, tc := range []struct {
		token    string
		outage   bool
		wantUser string // "": refused
		wantAsk  bool
	}{
		{token: good, wantUser: User},
		{token: revoked},
		{token: "foreign-good", wantUser: "arn:aws:sts::111122223333:assumed-role/admin/authvault", wantAsk: true},
		{token: "foreign-bad", wantAsk: true},
		{token: "foreign-good", outage: true},
	} {
		asked = nil
		i.SetOutage(tc.outage)
		got := review(t, i, tc.token)
		if got.Authenticated != (tc.wantUser != "") || got.User.Username != tc.wantUser {
			t.Errorf("token %.12s (outage %v): authenticated %v as %q, want %q", tc.token, tc.outage,
				got.Authenticated, got.User.Username, tc.wantUser)
		}
		if got.Authenticated && !slices.Contains(got.User.Groups, "system:masters") {
			t.Errorf("token %.12s: groups %v, want system:masters as for the issuer's own", tc.token, got.User.Groups)
		}
		if (len(asked) > 0) != tc.wantAsk {
			t.Errorf("token %.12s (outage %v): AcceptFunc asked about %d tokens, want asked: %v", tc.token, tc.outage, len(asked), tc.wantAsk)
		}
	}
	i.SetOutage(false)

	i.SetAccept(nil)
	before := i.Rejected()
	if got := review(t, i, "foreign-good"); got.Authenticated {
		t.Error("after SetAccept(nil), a token the issuer did not issue is accepted")
	}
	if i.Rejected() != before+1 {
		t.Errorf("Rejected went from %d to %d, want one more", before, i.Rejected())
	}
}

// Reviews run concurrently (the API server sends them so): the AcceptFunc
// may be replaced while they do, under -race.
func TestSetAcceptWhileReviewing(t *testing.T) {
	i := newIssuer(httptest.NewUnstartedServer(nil))
	var calls atomic.Int64
	accept := func(string) (string, bool) { calls.Add(1); return "someone", true }
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			review(t, i, "foreign")
		}
	}()
	for range 50 {
		i.SetAccept(accept)
		i.SetAccept(nil)
	}
	i.SetAccept(accept)
	<-done
	if got := review(t, i, "foreign"); !got.Authenticated || calls.Load() == 0 {
		t.Errorf("with an AcceptFunc set: authenticated %v, %d calls", got.Authenticated, calls.Load())
	}
}

// review sends i's webhook a TokenReview of tok, as the API server does,
// and returns its status.
func review(t *testing.T, i *Issuer, tok string) authenticationv1.TokenReviewStatus {
	body, err := json.Marshal(authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok}})
	if err != nil {
		t.Error(err)
		return authenticationv1.TokenReviewStatus{}
	}
	rec := httptest.NewRecorder()
	i.srv.Config.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body)))
	var tr authenticationv1.TokenReview
	if err := json.NewDecoder(rec.Body).Decode(&tr); err != nil {
		t.Errorf("the webhook's answer (%d) is no TokenReview: %v", rec.Code, err)
	}
	return tr.Status
}
