package addonauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/utils/lru"
)

// errUnavailable: the token could not be verified now (the API server is
// unreachable, or answered an error), and no recent review vouches for it:
// a 503, never cached.
var errUnavailable = errors.New("addonauth: the token cannot be verified now")

// reviewer asks the API server about tokens through TokenReview, and caches
// the answers by a keyed hash of the token.
type reviewer struct {
	client    authnclient.TokenReviewInterface
	audiences []string // any of them will do
	opts      *Options
	metrics   *metrics

	key     []byte            // HMAC key, made per process
	cache   *lru.Cache        // tokenKey → *reviewed; locks itself
	flight  flight[*reviewed] // by tokenKey
	seq     atomic.Uint64     // of the last review asked; see reviewed.seq
	backend *circuit          // remembers that reviews fail, so that callers do not wait for each

	// Reviews are overdue (see staleDeadline) while the latest review a
	// caller stopped waiting for (StaleWait) began after the last answer:
	// late is when that review began, answered when the last review
	// answered, both since epoch by the monotonic clock, and only grow.
	epoch    time.Time
	late     atomic.Int64
	answered atomic.Int64

	mu    sync.Mutex             // guards began
	began map[tokenKey]time.Time // when each review in flight began, by the real clock; see staleDeadline
}

type tokenKey [sha256.Size]byte

// reviewed is what the API server last said about a token.
type reviewed struct {
	user     User
	err      error     // nil: accepted
	until    time.Time // trusted until
	lastGood time.Time // of the last review that accepted it; zero when none
	// seq orders the reviews: one asked later has a larger seq, so a
	// stream can tell a verdict made after its last check from one made
	// before, whatever the clock says.
	seq uint64
	// foreign: the local check did not vouch for the token, so a failed
	// review of it may be the token's own failure (see ask).
	foreign bool
}

// newerThan tells whether v was asked after the review numbered since;
// since 0 takes any verdict.
func (v *reviewed) newerThan(since uint64) bool {
	return since == 0 || v.seq > since
}

func newReviewer(client authnclient.TokenReviewInterface, opts *Options, m *metrics) *reviewer {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails on supported platforms
	return &reviewer{client: client, audiences: opts.Audiences, opts: opts, metrics: m, key: key, cache: lru.New(opts.CacheSize),
		backend: newCircuit("TokenReviews", opts.now, opts.Logger), began: map[tokenKey]time.Time{}, epoch: time.Now()}
}

// cached returns the fresh verdict on token, if there is one: the local
// check was made when it was reviewed, and its entry ends no later than
// the token.
func (r *reviewer) cached(token string) (*reviewed, bool) {
	v, ok := r.cache.Get(r.keyOf(token))
	if !ok {
		r.metrics.cache.WithLabelValues("miss").Inc()
		return nil, false
	}
	if p := v.(*reviewed); r.opts.now().Before(p.until) {
		r.metrics.cache.WithLabelValues("hit").Inc()
		return p, true
	}
	r.metrics.cache.WithLabelValues("miss").Inc()
	return nil, false
}

// trustedFor is how long the cached verdict on token is trusted yet: zero
// for a refusal, and the longest duration when none is kept or it has
// lapsed (a stale answer in an outage).
func (r *reviewer) trustedFor(token string) time.Duration {
	v, ok := r.cache.Get(r.keyOf(token))
	if !ok {
		return math.MaxInt64
	}
	p := v.(*reviewed)
	if p.err != nil {
		return 0
	}
	if d := p.until.Sub(r.opts.now()); d > 0 {
		return d
	}
	return math.MaxInt64
}

// remember caches a local verdict, for NoReview: until the token expires,
// and no longer than SuccessTTL.
func (r *reviewer) remember(token string, u User) {
	until := r.opts.now().Add(r.opts.SuccessTTL)
	if u.Expires.Before(until) {
		until = u.Expires
	}
	r.cache.Add(r.keyOf(token), &reviewed{user: u, until: until})
}

func (r *reviewer) keyOf(token string) tokenKey {
	mac := hmac.New(sha256.New, r.key)
	mac.Write([]byte(token))
	var k tokenKey
	mac.Sum(k[:0])
	return k
}

// review returns the user the API server names for token, from the cache
// while its answer is fresh. local is what the local check found (for a
// foreign token no Name, only its exp if it has one): a review never
// extends access past the token's own expiry. A request's caller whose
// token has a stale verdict waits for the review only StaleWait.
func (r *reviewer) review(ctx context.Context, token string, local User) (User, error) {
	return r.reviewMaybeFresh(ctx, token, local, 0, true)
}

// reviewMaybeFresh reviews token, or takes a fresh verdict asked after the
// review numbered since (0: any fresh verdict). With mayStale, a caller
// whose token has a verdict fallback would serve stops waiting for the
// review after StaleWait and is served from it; the review goes on.
func (r *reviewer) reviewMaybeFresh(ctx context.Context, token string, local User, since uint64, mayStale bool) (User, error) {
	k := r.keyOf(token)
	now := r.opts.now()
	prev, _ := r.cache.Get(k)
	// While reviews fail, a caller does not join a flight (a probe of this
	// token's) to wait for it: it is answered now.
	if err := r.backend.holding(); err != nil {
		r.metrics.reviews.WithLabelValues("skipped").Inc()
		return r.fallback(prev, now, err)
	}
	// One review per token however many requests carry it, keyed by
	// the token's hash; it runs for all of them, so one caller's cancel
	// must not end it, and a caller that goes away stops waiting at once.
	answer := r.flight.start(ctx, string(k[:]), r.opts.ReviewTimeout, func(ctx context.Context) (*reviewed, error) {
		r.mark(k)
		defer r.unmark(k)
		// A flight that ended since this caller missed the cache left
		// its answer there: no second review.
		if v, ok := r.cache.Get(k); ok && v.(*reviewed).newerThan(since) && r.opts.now().Before(v.(*reviewed).until) {
			return v.(*reviewed), nil
		}
		got, err := r.ask(ctx, token, local)
		if err == nil {
			r.cache.Add(k, got) // before the flight ends, so no caller falls between
			raise(&r.answered, time.Since(r.epoch))
		}
		return got, err
	})
	waitCtx, began := ctx, time.Time{}
	if mayStale && r.servesStale(prev, now) {
		var deadline time.Time
		deadline, began = r.staleDeadline(k)
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	got, err := wait[*reviewed](waitCtx, answer)
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller went away: it takes no stale answer, and counts
		// for none.
		return User{}, fmt.Errorf("%w: waiting for a TokenReview: %w", errUnavailable, err)
	case err != nil && waitCtx.Err() != nil:
		// Past StaleWait: the stale verdict serves; the review goes on,
		// and leaves its answer in the cache for the next requests.
		raise(&r.late, began.Sub(r.epoch))
		return r.fallback(prev, now, err)
	case err != nil:
		return r.fallback(prev, now, err) // not cached: the next request asks again
	}
	// got is shared by every caller of the flight: read only.
	if !got.newerThan(since) {
		// This caller joined a flight that answered from a verdict older
		// than the one it already has: it learnt nothing, ask again.
		return r.reviewMaybeFresh(ctx, token, local, since, mayStale)
	}
	return got.user, got.err
}

// servesStale tells whether prev, the token's last verdict, would serve
// it if its review failed now (see fallback).
func (r *reviewer) servesStale(prev any, now time.Time) bool {
	p, ok := prev.(*reviewed)
	return ok && p.err == nil && !p.lastGood.IsZero() &&
		now.Sub(p.lastGood) < r.opts.StaleIfError && (p.user.Expires.IsZero() || now.Before(p.user.Expires))
}

// staleDeadline is when a caller with a stale verdict stops waiting for
// the review of k, and when that review began: StaleWait after it began,
// so that callers who join a review already late are served at once, not
// StaleWait each; and now while reviews are overdue (see overdue), so that
// a hung API server costs StaleWait to the callers at its onset, not to
// each token's first. Real time: the wait is a timer's, whatever the clock
// of the verdicts.
func (r *reviewer) staleDeadline(k tokenKey) (deadline, began time.Time) {
	now := time.Now()
	r.mu.Lock()
	began, ok := r.began[k]
	r.mu.Unlock()
	if !ok { // the review's goroutine has not begun yet
		began = now
	}
	if r.overdue(now) {
		return now, began
	}
	return began.Add(r.opts.StaleWait), began
}

// overdue tells whether a caller has stopped waiting for a review that
// began less than a ReviewTimeout before now, and after the last answer of
// a review: a review begun since that answered shows that the API server
// answers, whatever one hung review (a token a hung webhook must answer)
// still keeps its callers from, so that a revocation is still seen at once.
func (r *reviewer) overdue(now time.Time) bool {
	late := r.late.Load()
	return late > r.answered.Load() && now.Sub(r.epoch)-time.Duration(late) < r.opts.ReviewTimeout
}

// raise sets v to d unless it holds more already.
func raise(v *atomic.Int64, d time.Duration) {
	for {
		old := v.Load()
		if int64(d) <= old || v.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// mark records that the review of k begins; unmark that it has ended.
func (r *reviewer) mark(k tokenKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.began[k] = time.Now()
}

func (r *reviewer) unmark(k tokenKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.began, k)
}

// inFlight is how many reviews are under way.
func (r *reviewer) inFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.began)
}

// fallback answers a caller whose review failed: from prev, the token's
// last verdict, when it accepted the token within StaleIfError and before
// its expiry; otherwise errUnavailable.
func (r *reviewer) fallback(prev any, now time.Time, err error) (User, error) {
	if r.servesStale(prev, now) {
		r.metrics.staleAccepts.Inc()
		return prev.(*reviewed).user, nil
	}
	return User{}, fmt.Errorf("%w: %w", errUnavailable, err)
}

// ask makes one TokenReview. An answer (accepted or not) is a *reviewed;
// an error means there was none. While reviews fail, ask fails at once
// (see circuit): the caller falls back on its stale verdict or a 503.
func (r *reviewer) ask(ctx context.Context, token string, local User) (*reviewed, error) {
	// A foreign token's review may fail for the token's sake, not the
	// API server's: see circuit.enter.
	foreign := local.Name == ""
	done, err := r.backend.enter(!foreign)
	if err != nil {
		r.metrics.reviews.WithLabelValues("skipped").Inc()
		return nil, err
	}
	seq := r.seq.Add(1) // before asking: the answer is at least this recent
	start := time.Now()
	tr, err := r.client.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: r.audiences},
	}, metav1.CreateOptions{})
	r.metrics.reviewSeconds.Observe(time.Since(start).Seconds())
	// A 400 is the API server's answer about this token (it names no
	// token, or one it finds malformed), not an outage: a caller must not
	// open the circuit for everyone with the tokens it sends.
	if apierrors.IsBadRequest(err) {
		tr, err = &authnv1.TokenReview{}, nil // not authenticated
	}
	done(err)
	if err != nil {
		r.metrics.reviews.WithLabelValues("error").Inc()
		return nil, err
	}
	st := tr.Status
	now := r.opts.now()
	// A review that vouches for no name vouches for no one: an upstream
	// reads an empty X-Authenticated-User as none, and the API server an
	// empty Impersonate-User as no impersonation (ActAsCaller would act
	// as the service itself).
	if !st.Authenticated || st.User.Username == "" || !slices.ContainsFunc(st.Audiences, func(aud string) bool { return slices.Contains(r.audiences, aud) }) {
		r.metrics.reviews.WithLabelValues("denied").Inc()
		return &reviewed{err: errReviewDenied, until: now.Add(r.opts.FailureTTL), seq: seq, foreign: foreign}, nil
	}
	r.metrics.reviews.WithLabelValues("accepted").Inc()
	until := now.Add(r.opts.SuccessTTL)
	if !local.Expires.IsZero() && local.Expires.Before(until) {
		until = local.Expires // never past the token's own expiry
	}
	return &reviewed{
		user:  User{Name: st.User.Username, UID: st.User.UID, Groups: st.User.Groups, Extra: extraOf(st.User.Extra), Expires: local.Expires},
		until: until, lastGood: now, seq: seq, foreign: foreign,
	}, nil
}

// recheck is a long request's periodic review of token: it takes a fresh
// verdict asked after since, the last one the request relied on (made
// for another request with the token: in the cache, or in flight), and
// asks the API server only when there is none. So one review a
// SuccessTTL serves every request that holds the token, and a revocation
// after since is seen. It returns the verdict's seq and until; since and
// a zero until when no newer verdict is kept (a stale answer in an
// outage).
func (r *reviewer) recheck(ctx context.Context, token string, local User, since uint64) (uint64, time.Time, error) {
	k := r.keyOf(token)
	if v, ok := r.cache.Get(k); ok {
		p := v.(*reviewed)
		if p.newerThan(since) && r.opts.now().Before(p.until) {
			r.metrics.cache.WithLabelValues("hit").Inc()
			return p.seq, p.until, p.err
		}
		if p.foreign {
			// local is the reviewed user: ask it as the first review did.
			local = User{Expires: local.Expires}
		}
	}
	r.metrics.cache.WithLabelValues("miss").Inc()
	if _, err := r.reviewMaybeFresh(ctx, token, local, since, false); err != nil {
		return since, time.Time{}, err
	}
	// The review left its verdict in the cache, unless a newer one took
	// its place (which counts, a refusal too) or it was pushed out.
	if v, ok := r.cache.Get(k); ok && v.(*reviewed).newerThan(since) {
		p := v.(*reviewed)
		return p.seq, p.until, p.err
	}
	return since, time.Time{}, nil
}

// extraOf is a review's extra attributes as a User holds them.
func extraOf(extra map[string]authnv1.ExtraValue) map[string][]string {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string][]string, len(extra))
	for k, v := range extra {
		out[k] = v
	}
	return out
}
