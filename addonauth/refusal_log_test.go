package addonauth

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/testkit/testlog"
)

// Refused callers are logged: each one at V(1), with the user when the
// caller was verified and the request was what was refused, and never the
// token; at INFO, a burst of them is one line at once and then at most one
// a minute, with the count. Before, a proxy that refused every caller said
// nothing but in its metrics.
func TestRefusalsAreLoggedOnceABurstAtInfo(t *testing.T) {
	for _, v := range []int{0, 1} {
		var logs testlog.Buffer
		clk := newManualClock()
		api := newFakeAPI(t)
		a, err := New(Options{Audience: audience, Config: api.config(), Logger: logs.Logger(v), now: clk.now,
			Authorization: &Authorization{}})
		if err != nil {
			t.Fatal(err)
		}
		s := &setup{api: api, auth: a, up: &recorder{}, srv: httptest.NewServer(a.Middleware(&recorder{}))}
		t.Cleanup(s.srv.Close)
		var tokens []string
		for range 30 {
			tok := api.token(t, "team-a", "client", "another-audience", time.Hour)
			tokens = append(tokens, tok)
			if resp, _ := s.get(t, tok, nil); resp.StatusCode != 401 {
				t.Fatalf("a token for another audience = %d, want 401", resp.StatusCode)
			}
		}
		alice := api.token(t, "team-a", "alice", audience, time.Hour) // no SubjectAccessReview allows her
		tokens = append(tokens, alice)
		if resp, _ := s.get(t, alice, nil); resp.StatusCode != 403 {
			t.Fatalf("a caller the API server does not allow = %d, want 403", resp.StatusCode)
		}
		clk.advance(refusalSummaryEvery)
		if resp, _ := s.get(t, tokens[0], nil); resp.StatusCode != 401 {
			t.Fatal("a refused token served")
		}

		out := logs.String()
		var summaries []string
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"msg"="callers refused`) {
				summaries = append(summaries, line)
			}
		}
		if len(summaries) != 2 || !strings.Contains(summaries[0], `"unauthenticated"=1`) || strings.Contains(summaries[0], "forbidden") ||
			!strings.Contains(summaries[1], `"unauthenticated"=30`) || !strings.Contains(summaries[1], `"forbidden"=1`) {
			t.Errorf("V(%d): INFO lines for 32 refusals over a minute = %q, want the first at once and the rest counted in one", v, summaries)
		}
		perCaller := strings.Count(out, `"msg"="caller refused"`) + strings.Count(out, `"msg"="caller not allowed"`)
		switch {
		case v == 0 && perCaller != 0:
			t.Errorf("V(0): %d per-caller lines, want none", perCaller)
		case v == 1 && perCaller != 32:
			t.Errorf("V(1): %d per-caller lines, want one for each of the 32 refusals", perCaller)
		case v == 1 && !strings.Contains(out, `"user"="system:serviceaccount:team-a:alice"`):
			t.Errorf("V(1): the refusal of a verified caller does not name it:\n%s", out)
		}
		for _, tok := range tokens {
			if strings.Contains(out, tok[len(tok)-20:]) {
				t.Fatalf("V(%d): the log holds a token", v)
			}
		}
	}
}
