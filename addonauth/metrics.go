package addonauth

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one Authenticator. Labels carry outcomes, never a user or a
// token.
type metrics struct {
	requests      *prometheus.CounterVec // by result
	reviews       *prometheus.CounterVec // by result
	cache         *prometheus.CounterVec // hit, miss
	staleAccepts  prometheus.Counter
	ended         *prometheus.CounterVec // requests the middleware ended, by reason
	reviewSeconds prometheus.Histogram
	verifySeconds prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "addonauth_requests_total",
			Help: "Requests by result: forwarded, unauthenticated, forbidden, cross_origin (a browser's, for a page of another site), rate_limited, unavailable, not_found (outside AllowPaths), ignored (IgnorePaths, forwarded unverified)."}, []string{"result"}),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "addonauth_token_reviews_total",
			Help: "TokenReviews, by result: accepted, denied, error, skipped (not sent: the API server failed a moment ago)."}, []string{"result"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "addonauth_review_cache_total",
			Help: "Review cache lookups: hit or miss."}, []string{"result"}),
		staleAccepts: prometheus.NewCounter(prometheus.CounterOpts{Name: "addonauth_stale_accepts_total",
			Help: "Tokens accepted on an earlier review while the API server could not be reached, or had not answered within StaleWait."}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "addonauth_requests_ended_total",
			Help: "Requests the middleware ended while they ran, by reason: token_expired, revoked, unavailable (past the stale bound of an outage), max_duration."}, []string{"reason"}),
		reviewSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "addonauth_token_review_duration_seconds",
			Help: "Time of one TokenReview.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		verifySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "addonauth_verify_duration_seconds",
			Help: "Time the middleware adds before a request is forwarded or refused.", Buckets: prometheus.ExponentialBuckets(0.00001, 2, 20)}),
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.reviews, m.cache, m.staleAccepts, m.ended, m.reviewSeconds, m.verifySeconds} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("addonauth: registering metrics: %w", err)
		}
	}
	return nil
}
