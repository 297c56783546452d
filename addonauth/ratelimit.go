package addonauth

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// limiters are the token buckets of the users seen last, at most MaxUsers:
// a user whose bucket was evicted starts again with a full one.
type limiters struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex // makes get-or-add one step
	users *lru.Cache // user name → *rate.Limiter
}

func newLimiters(o *Options) *limiters {
	if o.RatePerUser <= 0 {
		return nil
	}
	return &limiters{limit: o.RatePerUser, burst: o.BurstPerUser, users: lru.New(o.MaxUsers)}
}

// allow takes a token from user's bucket at now; when it is empty, it
// returns false and how long until the next token.
func (l *limiters) allow(user string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	v, ok := l.users.Get(user)
	if !ok {
		v = rate.NewLimiter(l.limit, l.burst)
		l.users.Add(user, v)
	}
	l.mu.Unlock()
	lim := v.(*rate.Limiter)
	if lim.AllowN(now, 1) {
		return true, 0
	}
	r := lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now) // only asked how long: the caller is refused, not queued
	return false, wait
}
