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
// for the next one but the caller that makes it.
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

	mu       sync.Mutex    // guards the fields below
	current  *keys         // nil until a fetch succeeds
	lastTry  time.Time     // of the last fetch, successful or not
	lastErr  error         // of the last fetch
	failing  bool          // the last fetch failed
	since    time.Time     // of the failure that began the outage
	fetching chan struct{} // closed when the fetch under way ends; nil when none
}

// keys is what the fetches found; never changed once made.
type keys struct {
	issuers []string                   // discovery has named, newest first
	byID    map[string]jose.JSONWebKey // of the last fetch
}

// names tells whether iss is an issuer the cluster's discovery has named.
func (s *keys) names(iss string) bool { return iss != "" && slices.Contains(s.issuers, iss) }

// errKeysUnavailable: no key set could be fetched yet.
var errKeysUnavailable = errors.New("addonauth: the service-account issuer's keys are unavailable")

// lookup returns the key set, fetched first when it has no key kid.
func (k *keySet) lookup(ctx context.Context, kid string) (*keys, error) {
	return k.keysFor(ctx, func(s *keys) bool { _, ok := s.byID[kid]; return ok })
}

// withIssuer returns the key set, fetched first when it does not name iss:
// for a token of the cluster's key, whose issuer may be a new one.
func (k *keySet) withIssuer(ctx context.Context, iss string) (*keys, error) {
	return k.keysFor(ctx, func(s *keys) bool { return s.names(iss) })
}

// keysFor returns the key set. When has says it lacks what a token needs, it
// is fetched first, unless the last fetch is younger than the interval;
// concurrent callers share one fetch, and one call makes or waits for one
// fetch at most. The error is errKeysUnavailable while no fetch has
// succeeded.
func (k *keySet) keysFor(ctx context.Context, has func(*keys) bool) (*keys, error) {
	k.mu.Lock()
	cur := k.current
	if cur != nil && has(cur) {
		k.mu.Unlock()
		return cur, nil
	}
	if done := k.fetching; done != nil {
		failing := k.failing
		k.mu.Unlock()
		// A fetch after a failure is a probe: its answer is likely no
		// better, so only its own caller waits for it.
		if !failing {
			select {
			case <-done:
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: waiting for them: %w", errKeysUnavailable, ctx.Err())
			}
		}
		k.mu.Lock()
		cur, err := k.current, k.lastErr
		k.mu.Unlock()
		return available(cur, err)
	}
	now := k.now()
	if cur != nil && now.Sub(k.lastTry) < k.interval {
		k.mu.Unlock()
		return cur, nil
	}
	if cur == nil && !k.lastTry.IsZero() && now.Sub(k.lastTry) < k.interval/10 {
		err := k.lastErr // the API server failed a moment ago
		k.mu.Unlock()
		return available(nil, err)
	}
	done := make(chan struct{})
	k.fetching, k.lastTry = done, now
	k.mu.Unlock()

	// The fetch serves every waiting caller: one caller's cancel must not
	// end it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.timeout)
	iss, byID, err := k.fetch(fctx)
	cancel()

	k.mu.Lock()
	began, ended := err != nil && !k.failing, err == nil && k.failing
	var down time.Duration
	switch {
	case err == nil:
		k.current = &keys{issuers: remember(k.current, iss), byID: byID}
		if k.failing {
			down = k.now().Sub(k.since)
		}
		k.failing = false
	case began:
		k.failing, k.since = true, k.now()
	}
	k.lastErr = err
	k.fetching = nil
	close(done)
	cur = k.current
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
	return available(cur, err)
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
