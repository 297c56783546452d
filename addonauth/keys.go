package addonauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
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
)

// errUnknownKey: the token names a key the issuer does not have, even
// after a refetch (or a refetch was made too recently).
var errUnknownKey = errors.New("addonauth: the token's key is not one of the service-account issuer's")

// keySet is the service-account issuer's name and keys, fetched when first
// needed and again, at most once per interval, for a key id it does not
// know. A failed fetch keeps the keys it has.
type keySet struct {
	client   rest.Interface
	interval time.Duration
	now      func() time.Time

	mu       sync.Mutex
	issuer   string
	keys     map[string]jose.JSONWebKey // by key id
	fetched  bool                       // issuer and keys are set
	lastTry  time.Time                  // of the last fetch, successful or not
	fetching chan struct{}              // closed when the fetch under way ends; nil when none
}

// lookup returns the issuer and the key kid names. It fetches the key set
// when there is none yet, or when kid is unknown and the last fetch is
// older than the interval; concurrent callers share one fetch.
func (k *keySet) lookup(ctx context.Context, kid string) (string, *jose.JSONWebKey, error) {
	for {
		k.mu.Lock()
		if key, ok := k.keys[kid]; ok {
			iss := k.issuer
			k.mu.Unlock()
			return iss, &key, nil
		}
		if k.fetching != nil { // wait for the fetch under way, then look again
			done := k.fetching
			k.mu.Unlock()
			select {
			case <-done:
				k.mu.Lock()
				key, ok := k.keys[kid]
				iss, fetched := k.issuer, k.fetched
				k.mu.Unlock()
				switch {
				case ok:
					return iss, &key, nil
				case fetched:
					return iss, nil, errUnknownKey
				default:
					return "", nil, errKeysUnavailable
				}
			case <-ctx.Done():
				return "", nil, fmt.Errorf("%w: waiting for them: %w", errKeysUnavailable, ctx.Err())
			}
		}
		if k.fetched && k.now().Sub(k.lastTry) < k.interval {
			iss := k.issuer
			k.mu.Unlock()
			return iss, nil, errUnknownKey
		}
		if !k.fetched && !k.lastTry.IsZero() && k.now().Sub(k.lastTry) < k.interval/10 {
			k.mu.Unlock() // the API server was unreachable a moment ago
			return "", nil, errKeysUnavailable
		}
		k.fetching = make(chan struct{})
		k.lastTry = k.now()
		k.mu.Unlock()

		// The fetch serves every waiting caller: one caller's cancel must
		// not end it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		iss, keys, err := k.fetch(fctx)
		cancel()
		k.mu.Lock()
		if err == nil {
			k.issuer, k.keys, k.fetched = iss, keys, true
		}
		close(k.fetching)
		k.fetching = nil
		k.mu.Unlock()
		if err != nil && !k.fetched {
			return "", nil, fmt.Errorf("%w: %w", errKeysUnavailable, err)
		}
		// Look again: the loop returns the key, or errUnknownKey now that
		// lastTry is recent.
	}
}

// errKeysUnavailable: no key set could be fetched yet.
var errKeysUnavailable = errors.New("addonauth: the service-account issuer's keys are unavailable")

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
