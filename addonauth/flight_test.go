package addonauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"

	"github.com/authvault/authvault/testkit/testwait"
)

// leaveWithin is how long a caller whose context ends may take to be back:
// a hang's bound (testwait.Hang). It is back at once; one that waited for
// the lookup would wait for the hung API server, which answers only when
// the test lets it (a tenth of a second was a busy machine's speed).
const leaveWithin = testwait.Hang

// A lookup of the API server is shared by every caller that needs it while
// it runs, and holds none of them past its own context: with the API
// server hung, the callers whose context is canceled (the one that started
// the lookup among them) are back at once with their context's error,
// while the lookup goes on for the others, who get its answer. One lookup
// reaches the API server for all of them.
func TestCanceledCallersLeaveASharedLookup(t *testing.T) {
	const callers = 50
	const reader = "system:serviceaccount:team-a:reader"
	for _, tc := range []struct {
		name string
		// lookup is one caller's, on the setup's API server: what it got.
		lookup func(ctx context.Context, s *setup, token string) (string, error)
		want   string
		asked  func(*fakeAPI) int64 // lookups that reached the API server
	}{{
		name: "issuer's keys",
		lookup: func(ctx context.Context, s *setup, _ string) (string, error) {
			set, err := s.auth.keys.lookup(ctx, s.api.kids[0])
			if err != nil {
				return "", err
			}
			if _, ok := set.byID[s.api.kids[0]]; !ok {
				return "a key set without the token's key", nil
			}
			return "the token's key", nil
		},
		want:  "the token's key",
		asked: func(f *fakeAPI) int64 { return f.discoveries.Load() },
	}, {
		name: "TokenReview",
		lookup: func(ctx context.Context, s *setup, token string) (string, error) {
			u, err := s.auth.reviewer.review(ctx, token, User{Name: reader, Expires: time.Now().Add(time.Hour)})
			return u.Name, err
		},
		want:  reader,
		asked: func(f *fakeAPI) int64 { return f.reviews.Load() },
	}, {
		name: "SubjectAccessReview",
		lookup: func(ctx context.Context, s *setup, _ string) (string, error) {
			err := s.auth.authz.authorize(ctx, User{Name: reader}, httptest.NewRequest(http.MethodGet, "/hello", nil))
			return "allowed", err
		},
		want:  "allowed",
		asked: func(f *fakeAPI) int64 { return f.accessReviews.Load() },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t, Options{ReviewTimeout: time.Minute, Authorization: &Authorization{}})
			token := s.api.token(t, "team-a", "reader", audience, time.Hour)
			s.api.accept(token, authnv1.UserInfo{Username: reader})
			s.api.allowed[reader+" get /hello"] = true
			s.api.setHung(true)
			defer s.api.setHung(false) // whatever fails: no lookup outlives the test

			type answer struct {
				got string
				err error
			}
			answers := make([]chan answer, callers)
			leaving, leave := context.WithCancel(context.Background())
			defer leave()
			call := func(i int, ctx context.Context) {
				answers[i] = make(chan answer, 1)
				go func() {
					got, err := tc.lookup(ctx, s, token)
					answers[i] <- answer{got, err}
				}()
			}
			// The caller that starts the lookup leaves: the lookup is
			// not its own. Half the others leave with it.
			call(0, leaving)
			waitFor(t, "the lookup to reach the API server", func() bool { return tc.asked(s.api) == 1 })
			for i := 1; i < callers; i++ {
				ctx := context.Background()
				if i%2 == 0 {
					ctx = leaving
				}
				call(i, ctx)
			}

			leave()
			deadline := time.Now().Add(leaveWithin)
			var waiting []int
			for i := 0; i < callers; i += 2 {
				a, ok := receiveBy(answers[i], deadline)
				switch {
				case !ok:
					waiting = append(waiting, i)
				case !errors.Is(a.err, context.Canceled):
					t.Errorf("caller %d, canceled: %q, %v; want %v", i, a.got, a.err, context.Canceled)
				}
			}
			if len(waiting) > 0 {
				t.Errorf("%d of %d canceled callers still wait for the hung lookup %v after the cancel: %v (0 started it)",
					len(waiting), callers/2, leaveWithin, waiting)
			}
			for i := 1; i < callers; i += 2 {
				select {
				case a := <-answers[i]:
					t.Fatalf("caller %d answered while the API server hangs: %q, %v", i, a.got, a.err)
				default:
				}
			}

			s.api.setHung(false)
			for i := 1; i < callers; i += 2 {
				select {
				case a := <-answers[i]:
					if a.err != nil || a.got != tc.want {
						t.Errorf("caller %d: %q, %v; want %q", i, a.got, a.err, tc.want)
					}
				case <-time.After(testwait.Hang):
					t.Fatalf("caller %d: no answer %v after the API server came back", i, testwait.Hang)
				}
			}
			if got := tc.asked(s.api); got != 1 {
				t.Errorf("%d lookups reached the API server for %d callers, want 1", got, callers)
			}
		})
	}
}

// receiveBy receives from ch by the deadline; past it, only what ch holds
// already.
func receiveBy[T any](ch <-chan T, deadline time.Time) (T, bool) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case v := <-ch:
		return v, true
	case <-timer.C:
	}
	select {
	case v := <-ch:
		return v, true
	default:
		var none T
		return none, false
	}
}
