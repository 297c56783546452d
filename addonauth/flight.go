package addonauth

import (
	"context"
	"time"

	"golang.org/x/sync/singleflight"
)

// flight is the one way the lookups of the API server (the issuer's keys,
// TokenReviews, SubjectAccessReviews) are shared: one lookup per key at a
// time, however many callers need it, and no caller held by it past its
// own context.
//
// A lookup serves every caller that joins it, so no caller's cancel may
// end it: it runs in a goroutine of its own, on a context that keeps the
// values of the context of the caller that started it but neither its
// cancel nor its deadline, bounded by a timeout of its own. A caller whose
// context ends leaves at once; the lookup goes on for the others and
// leaves its answer where the next caller looks first (the cache, the key
// set). So the lookup's goroutine ends by its timeout, whoever is left.
//
// A zero flight is ready to use; T is what a lookup returns.
type flight[T any] struct {
	group singleflight.Group
}

// start begins the lookup of key, or joins the one under way; wait takes
// its answer from the channel.
func (f *flight[T]) start(ctx context.Context, key string, timeout time.Duration, lookup func(context.Context) (T, error)) <-chan singleflight.Result {
	detached := context.WithoutCancel(ctx)
	return f.group.DoChan(key, func() (any, error) {
		ctx, cancel := context.WithTimeout(detached, timeout)
		defer cancel()
		return lookup(ctx)
	})
}

// do is start, then wait.
func (f *flight[T]) do(ctx context.Context, key string, timeout time.Duration, lookup func(context.Context) (T, error)) (T, error) {
	return wait[T](ctx, f.start(ctx, key, timeout, lookup))
}

// forget makes the next start of key begin a new lookup, even while the
// one under way has not returned yet: for a lookup that records its own
// end, so that a caller that reads the record starts a lookup, never joins
// one that has ended.
func (f *flight[T]) forget(key string) { f.group.Forget(key) }

// wait returns what the lookup returned (its value, even with an error),
// or ctx's error as soon as ctx ends, with T's zero value. An answer there
// already is taken, whatever ctx.
func wait[T any](ctx context.Context, answer <-chan singleflight.Result) (T, error) {
	select {
	case res := <-answer:
		v, _ := res.Val.(T)
		return v, res.Err
	default:
	}
	select {
	case res := <-answer:
		v, _ := res.Val.(T)
		return v, res.Err
	case <-ctx.Done():
		var none T
		return none, ctx.Err()
	}
}
