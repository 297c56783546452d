package vault

import (
	"time"
)

// The vault's log follows one rule: what a person running the operator
// needs to know is logged at INFO, once (a login and why, its end, which
// handler's credentials are handed out and until when); what happens per
// request (an invalidation, an expiry found by Select) is at V(1); failures
// are at error level. The helpers below keep the lifecycle lines alike.

// expirationValue is an expiration as a log value: "never" for the zero
// time, which a line would otherwise print as year 1.
func expirationValue(t time.Time) any {
	if t.IsZero() {
		return "never"
	}
	return t.Round(0) // without the monotonic reading: a wall-clock time
}

// withTime appends key and t to kv unless t is zero: no log line shows the
// zero time.
func withTime(kv []any, key string, t time.Time) []any {
	if t.IsZero() {
		return kv
	}
	return append(kv, key, t.Round(0))
}
