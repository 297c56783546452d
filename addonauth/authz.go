package addonauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/lru"

	"github.com/authvault/authvault/internal/methodoverride"
)

// Authorization makes every verified caller also need the API server's
// permission, by SubjectAccessReview, before its request is forwarded.
type Authorization struct {
	// Resource, when set, is what the caller must be allowed, as
	// kube-rbac-proxy's resource attributes ("get services/proxy in
	// monitoring"); an empty Verb takes the request's (get, create,
	// update, patch, delete). When nil, the caller must be allowed the
	// request's path and verb as a non-resource URL, and a path some
	// upstream would serve as another is refused. Either way, while the
	// verb comes from the request, a request with a method override is
	// refused.
	Resource *authzv1.ResourceAttributes
	// AllowTTL and DenyTTL are how long answers are cached. Defaults: 1 min
	// and 10 s.
	AllowTTL, DenyTTL time.Duration
}

// errForbidden: the API server does not allow the caller the request (403).
var errForbidden = errors.New("addonauth: the caller is not allowed this request")

// authorizer asks SubjectAccessReviews and caches their answers.
type authorizer struct {
	client  authzclient.SubjectAccessReviewInterface
	cfg     Authorization
	now     func() time.Time
	timeout time.Duration
	cache   *lru.Cache       // [32]byte → decision
	flight  flight[decision] // by specKey
	backend *circuit         // remembers that reviews fail, so that callers do not wait for each
}

type decision struct {
	allowed bool
	until   time.Time
}

func newAuthorizer(client authzclient.SubjectAccessReviewInterface, o *Options) *authorizer {
	if o.Authorization == nil {
		return nil
	}
	cfg := *o.Authorization
	cfg.AllowTTL = defaulted(cfg.AllowTTL, time.Minute)
	cfg.DenyTTL = defaulted(cfg.DenyTTL, 10*time.Second)
	return &authorizer{client: client, cfg: cfg, now: o.now, timeout: o.ReviewTimeout, cache: lru.New(o.CacheSize),
		backend: newCircuit("SubjectAccessReviews", o.now, o.Logger)}
}

// verbs maps HTTP methods to the API server's verbs.
var verbs = map[string]string{
	http.MethodGet: "get", http.MethodHead: "get", http.MethodOptions: "get",
	http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
}

// authorize returns nil when u may make r, errForbidden when not, and an
// errUnavailable when the API server cannot say.
func (z *authorizer) authorize(ctx context.Context, u User, r *http.Request) error {
	if z == nil {
		return nil
	}
	spec := authzv1.SubjectAccessReviewSpec{User: u.Name, UID: u.UID, Groups: u.Groups, Extra: sarExtra(u.Extra)}
	verb := verbs[r.Method]
	if verb == "" {
		verb = strings.ToLower(r.Method)
	}
	if (z.cfg.Resource == nil || z.cfg.Resource.Verb == "") && methodoverride.In(r) {
		// The review would check the method while the upstream
		// serves another.
		return fmt.Errorf("%w: %w", errForbidden, errMethodOverride)
	}
	if z.cfg.Resource != nil {
		attrs := *z.cfg.Resource
		if attrs.Verb == "" {
			attrs.Verb = verb
		}
		spec.ResourceAttributes = &attrs
	} else {
		// The upstream may serve another path than the one the API
		// server would be asked about: /public/..;/admin.
		p, err := canonicalPath(r.URL)
		if err != nil {
			return fmt.Errorf("%w: %w", errForbidden, err)
		}
		spec.NonResourceAttributes = &authzv1.NonResourceAttributes{Path: p, Verb: verb}
	}
	key := specKey(spec)
	if v, ok := z.cache.Get(key); ok {
		if d := v.(decision); z.now().Before(d.until) {
			return d.errOf()
		}
	}
	// While reviews fail, a caller neither asks nor joins a probe's
	// flight: a hung API server costs one caller its timeout.
	if err := z.backend.holding(); err != nil {
		return fmt.Errorf("%w: a SubjectAccessReview: %w", errUnavailable, err)
	}
	// One review per question however many requests ask it; it runs for
	// all of them, so one caller's cancel must not end it, and a caller
	// that goes away stops waiting at once.
	d, err := z.flight.do(ctx, string(key[:]), z.timeout, func(ctx context.Context) (decision, error) {
		if v, ok := z.cache.Get(key); ok && z.now().Before(v.(decision).until) {
			return v.(decision), nil // a flight that just ended answered it
		}
		// The question is this process's, built from a verified user and
		// a canonical path: its failure is the API server's.
		done, err := z.backend.enter(true)
		if err != nil {
			return decision{}, err
		}
		sar, err := z.client.Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if apierrors.IsBadRequest(err) {
			// An answer about this question (one the API server finds
			// invalid), not an outage: refused, and no circuit opened.
			sar, err = &authzv1.SubjectAccessReview{}, nil
		}
		done(err)
		if err != nil {
			return decision{}, err
		}
		d := decision{allowed: sar.Status.Allowed, until: z.now().Add(z.cfg.DenyTTL)}
		if d.allowed {
			d.until = z.now().Add(z.cfg.AllowTTL)
		}
		z.cache.Add(key, d)
		return d, nil
	})
	if err != nil {
		return fmt.Errorf("%w: a SubjectAccessReview: %w", errUnavailable, err)
	}
	return d.errOf()
}

// errMethodOverride: the request asks the upstream to take it as another
// method than its own, which the review checks.
var errMethodOverride = errors.New("addonauth: a method override")

func (d decision) errOf() error {
	if d.allowed {
		return nil
	}
	return errForbidden
}

// specKey identifies a review's question; fields are length-prefixed so
// that no two questions share a key.
func specKey(s authzv1.SubjectAccessReviewSpec) [sha256.Size]byte {
	h := sha256.New()
	add := func(v string) { fmt.Fprintf(h, "%d:%s;", len(v), v) }
	add(s.User)
	add(s.UID)
	add(fmt.Sprint(len(s.Groups)))
	for _, g := range s.Groups {
		add(g)
	}
	keys := slices.Sorted(maps.Keys(s.Extra))
	add(fmt.Sprint(len(keys)))
	for _, k := range keys {
		add(k)
		add(fmt.Sprint(len(s.Extra[k])))
		for _, v := range s.Extra[k] {
			add(v)
		}
	}
	if a := s.ResourceAttributes; a != nil {
		for _, v := range []string{"resource", a.Namespace, a.Verb, a.Group, a.Version, a.Resource, a.Subresource, a.Name} {
			add(v)
		}
	}
	if a := s.NonResourceAttributes; a != nil {
		add("nonresource")
		add(a.Path)
		add(a.Verb)
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// sarExtra is a caller's extra attributes as a SubjectAccessReview asks
// with them: an authorizer may narrow what the caller may do by them
// (scoped tokens), as the API server's own reviews do.
func sarExtra(extra map[string][]string) map[string]authzv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string]authzv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = v
	}
	return out
}
