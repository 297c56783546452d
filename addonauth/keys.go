package addonauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// Paths of the API server's service-account issuer discovery. The keys are
// fetched from the API server itself, not from the jwks_uri the document
// advertises: that names the issuer's public address, often unreachable
// from inside the cluster.
const (
	discoveryPath = "/.well-known/openid-configuration"
	jwksPath      = "/openid/v1/jwks"
	// maxKeySetBytes bounds what is read of either document.
	maxKeySetBytes = 1 << 20
	// fetchTimeout bounds a fetch of both documents.
	fetchTimeout = 10 * time.Second
	// maxIssuers bounds the issuers a key set remembers.
	maxIssuers = 8
)

// keySet is the service-account issuer's keys, and the issuers its
// discovery document has named, fetched when first needed and again, at
// most once per interval, for a key id or an issuer it does not know. A
// failed fetch keeps what it has, and while fetches fail no caller waits
// for the next one but the caller that makes it; no caller waits past its
// own context (see flight).
//
// Issuers are remembered, not replaced: an API server restarted with
// --service-account-issuer=new --service-account-issuer=old signs with the
// new one and accepts both, but its discovery names only the new one.
type keySet struct {
	client   rest.Interface
	interval time.Duration
	timeout  time.Duration // bounds one fetch of both documents
	now      func() time.Time
	log      logr.Logger

	// flight runs the fetches, one at a time. A caller joins the one
	// under way, or starts one, with mu held; a fetch records its end
	// and forgets its flight with mu held: so a caller that finds no
	// fetch under way starts one, never joins one that has ended.
	flight flight[*keys]

	mu       sync.Mutex // guards the fields below; taken before flight's own
	current  *keys      // nil until a fetch succeeds
	lastTry  time.Time  // of the last fetch, successful or not
	lastErr  error      // of the last fetch
	failing  bool       // the last fetch failed
	since    time.Time  // of the failure that began the outage
	fetching bool       // a fetch is under way
}

// keySetFlight is the key of the key set's fetches in their flight: there
// is one key set.
const keySetFlight = "keys"

// keys is what the fetches found; never changed once made.
type keys struct {
	issuers []string                   // discovery has named, newest first
	byID    map[string]jose.JSONWebKey // of the last fetch
	fetched time.Time                  // when the fetch that found them began
}

// names tells whether iss is an issuer the cluster's discovery has named.
func (s *keys) names(iss string) bool { return iss != "" && slices.Contains(s.issuers, iss) }

// errKeysUnavailable: no key set could be fetched yet.
var errKeysUnavailable = errors.New("addonauth: the service-account issuer's keys are unavailable")

// errIssuerUnsettled: no discovery fetched yet tells whether the cluster
// names a token's issuer (see keySet.settle); a 503.
var errIssuerUnsettled = errors.New("addonauth: discovery has not been read since the token was issued, so its issuer cannot be told yet")

// lookup returns the key set, fetched first when it has no key kid.
func (k *keySet) lookup(ctx context.Context, kid string) (*keys, error) {
	return k.keysFor(ctx, func(s *keys) bool { _, ok := s.byID[kid]; return ok })
}

// withIssuer returns the key set, fetched first when it does not name iss:
// for a token of the cluster's key, whose issuer may be a new one.
func (k *keySet) withIssuer(ctx context.Context, iss string) (*keys, error) {
	return k.keysFor(ctx, func(s *keys) bool { return s.names(iss) })
}

// unsettledGap is the least time between two fetches of discovery for
// tokens of the cluster's key whose issuer it does not name, under
// NoReview, while no fetch can settle them (see settle): short, since
// they get 503 meanwhile, and as long as the Retry-After of that 503.
const unsettledGap = time.Second

// settle returns the key set once it tells whether the cluster's
// discovery names iss, for a verified token of the cluster's key that was
// issued before tells (its iat, rounded up, plus the clock skew allowed):
// it names iss, or was fetched at tells or later. Unlike withIssuer it does
// not wait for the interval, nothing else vouching for the token: it
// fetches at once when no fetch began in the last unsettledGap, and when a
// fetch now would tell. The error is errIssuerUnsettled while nothing can
// tell: a fetch failed, or the last one began a moment ago without naming
// iss. Only the cluster's key makes such tokens, and one fetch settles
// every token issued long enough before it, so the fetches are few.
func (k *keySet) settle(ctx context.Context, iss string, tells time.Time) (*keys, error) {
	gap := min(k.interval, unsettledGap)
	for fetches := 0; ; fetches++ {
		k.mu.Lock()
		cur := k.current
		if cur != nil && (cur.names(iss) || !cur.fetched.Before(tells)) {
			k.mu.Unlock()
			return cur, nil
		}
		now := k.now()
		switch {
		case fetches == 2: // one joined, one begun after it: no more
			k.mu.Unlock()
			return nil, errIssuerUnsettled
		case k.fetching && k.failing:
			// A probe after a failure: only its own caller waits.
			err := k.lastErr
			k.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", errIssuerUnsettled, err)
		case k.fetching: // joined below
		case now.Sub(k.lastTry) < gap && (k.failing || now.Before(tells)):
			// The last fetch, a moment ago, failed, or did not name iss
			// and could not tell: a fetch now could not either.
			err := k.lastErr
			k.mu.Unlock()
			if err != nil && k.failing {
				return nil, fmt.Errorf("%w: %w", errIssuerUnsettled, err)
			}
			return nil, errIssuerUnsettled
		default:
			k.fetching, k.lastTry = true, now
		}
		fetched := k.flight.start(ctx, keySetFlight, k.timeout, k.refresh)
		k.mu.Unlock()
		if _, err := wait[*keys](ctx, fetched); err != nil {
			return nil, fmt.Errorf("%w: %w", errIssuerUnsettled, err)
		}
	}
}

// keysFor returns the key set. When has says it lacks what a token needs, it
// is fetched first, unless the last fetch is younger than the interval;
// concurrent callers share one fetch, and one call makes or waits for one
// fetch at most. A caller whose context ends stops waiting at once; the
// fetch goes on for the others. The error is errKeysUnavailable while no
// fetch has succeeded.
func (k *keySet) keysFor(ctx context.Context, has func(*keys) bool) (*keys, error) {
	k.mu.Lock()
	cur := k.current
	if cur != nil && has(cur) {
		k.mu.Unlock()
		return cur, nil
	}
	switch now := k.now(); {
	case k.fetching && k.failing:
		// A fetch after a failure is a probe: its answer is likely no
		// better, so only its own caller waits for it.
		err := k.lastErr
		k.mu.Unlock()
		return available(cur, err)
	case k.fetching: // joined below
	case cur != nil && now.Sub(k.lastTry) < k.interval:
		k.mu.Unlock()
		return cur, nil
	case cur == nil && !k.lastTry.IsZero() && now.Sub(k.lastTry) < k.interval/10:
		err := k.lastErr // the API server failed a moment ago
		k.mu.Unlock()
		return available(nil, err)
	default:
		k.fetching, k.lastTry = true, now
	}
	fetched := k.flight.start(ctx, keySetFlight, k.timeout, k.refresh)
	k.mu.Unlock()
	cur, err := wait[*keys](ctx, fetched)
	return available(cur, err)
}

// refresh is one fetch, for every caller that waits for it: the key set
// it leaves, and its error.
func (k *keySet) refresh(ctx context.Context) (*keys, error) {
	k.mu.Lock()
	start := k.lastTry // set by the caller that started this fetch
	k.mu.Unlock()
	iss, byID, err := k.fetch(ctx)

	k.mu.Lock()
	began, ended := err != nil && !k.failing, err == nil && k.failing
	var down time.Duration
	switch {
	case err == nil:
		k.current = &keys{issuers: remember(k.current, iss), byID: byID, fetched: start}
		if k.failing {
			down = k.now().Sub(k.since)
		}
		k.failing = false
	case began:
		k.failing, k.since = true, k.now()
	}
	k.lastErr = err
	k.fetching = false
	k.flight.forget(keySetFlight)
	cur := k.current
	k.mu.Unlock()
	// Once per outage, not per fetch, at Info: logr's Error makes zap
	// print a stack trace, which says nothing here.
	switch {
	case began:
		k.log.Info("the API server fails the service-account issuer's keys: tokens with a key or an issuer not seen yet cannot be verified",
			"error", err.Error(), "retryEvery", k.interval)
	case ended:
		k.log.Info("the API server serves the service-account issuer's keys again", "after", down.Round(time.Millisecond))
	}
	return cur, err
}

// available is cur, or errKeysUnavailable (with why) when there is none.
func available(cur *keys, why error) (*keys, error) {
	switch {
	case cur != nil:
		return cur, nil
	case why != nil:
		return nil, fmt.Errorf("%w: %w", errKeysUnavailable, why)
	}
	return nil, errKeysUnavailable
}

// remember is the issuers of prev with iss first, at most maxIssuers.
func remember(prev *keys, iss string) []string {
	out := []string{iss}
	if prev != nil {
		for _, old := range prev.issuers {
			if old != iss && len(out) < maxIssuers {
				out = append(out, old)
			}
		}
	}
	return out
}

// fetch reads the issuer discovery document and the key set.
func (k *keySet) fetch(ctx context.Context) (string, map[string]jose.JSONWebKey, error) {
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := k.get(ctx, discoveryPath, &doc); err != nil {
		return "", nil, err
	}
	if doc.Issuer == "" {
		return "", nil, fmt.Errorf("addonauth: %s names no issuer", discoveryPath)
	}
	var set jose.JSONWebKeySet
	if err := k.get(ctx, jwksPath, &set); err != nil {
		return "", nil, err
	}
	keys := map[string]jose.JSONWebKey{}
	for _, key := range set.Keys {
		if key.KeyID == "" || !key.Valid() || !key.IsPublic() {
			continue // the API server names every key; a nameless one cannot be chosen safely
		}
		keys[key.KeyID] = key
	}
	return doc.Issuer, keys, nil
}

func (k *keySet) get(ctx context.Context, path string, into any) error {
	body, err := k.client.Get().AbsPath(path).Stream(ctx)
	if err != nil {
		return fmt.Errorf("addonauth: fetching %s: %w", path, err)
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, maxKeySetBytes+1))
	if err != nil {
		return fmt.Errorf("addonauth: reading %s: %w", path, err)
	}
	if len(raw) > maxKeySetBytes {
		return fmt.Errorf("addonauth: %s is larger than %d bytes", path, maxKeySetBytes)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("addonauth: %s is not valid JSON: %w", path, err)
	}
	return nil
}
