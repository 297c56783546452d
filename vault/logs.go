package vault

import (
	"slices"
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

// logServingLocked says, once for each change, whose credentials the vault
// hands out now: the handlers of s's highest priority. An empty vault says
// nothing (the login that follows does), so a handler that comes back after
// its credential was rejected is not announced again; nor does a snapshot
// whose credentials are held back for a first login.
func (v *Vault) logServingLocked(s *snapshot) {
	if v.core.closed || s.held || len(s.groups) == 0 {
		return
	}
	top := s.groups[0]
	ids := make([]string, 0, len(top))
	for _, c := range top {
		ids = append(ids, c.Handler)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if slices.Equal(ids, v.serving) {
		return
	}
	v.serving = ids
	first := top[0]
	if first.owner != nil && first.owner.fallback {
		why := "no login handler registered: using a fallback"
		if len(v.core.handlers) > 0 {
			why = "using a fallback: no registered login handler has a credential"
		}
		v.log.Info(why, "handler", first.Handler, "server", first.Info.Server,
			"priority", first.Info.Priority, "expiration", expirationValue(first.Info.Expiration),
			"why", "the highest-priority fallback that gave a credential")
		return
	}
	if len(ids) > 1 {
		v.log.Info("serving", "handlers", ids, "priority", first.Info.Priority)
		return
	}
	v.log.Info("serving", "handler", first.Handler, "server", first.Info.Server, "priority", first.Info.Priority,
		"expiration", expirationValue(first.Info.Expiration))
}
