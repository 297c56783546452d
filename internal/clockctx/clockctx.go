// Package clockctx carries the vault's clock to the handlers it runs, so that
// a handler's notion of now (a token file's read time, say) is the vault's.
// Without one in the context, the clock is the real one.
package clockctx

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

type key struct{}

// With returns ctx carrying clk.
func With(ctx context.Context, clk clock.PassiveClock) context.Context {
	return context.WithValue(ctx, key{}, clk)
}

// Now is the time on ctx's clock.
func Now(ctx context.Context) time.Time {
	if clk, ok := ctx.Value(key{}).(clock.PassiveClock); ok {
		return clk.Now()
	}
	return time.Now()
}
