package addonauth

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A caller that comes as a key fetch ends (its end recorded, its flight
// not yet gone) starts a fetch of its own, never joins the one that
// ended: joining it would leave a fetch recorded as under way with none
// running, and after a failure every caller would take it for a probe,
// answered at once, for good. Callers hammer a failing API server while
// the clock runs; once it is back, the keys are fetched again.
func TestKeyFetchesNeverEndWithAFetchRecordedUnderWay(t *testing.T) {
	clk := newManualClock()
	s := newSetup(t, Options{KeyRefetchInterval: 10 * time.Millisecond, now: clk.now})
	s.api.setDown(true)
	kid := s.api.kids[0]
	ctx, stop := context.WithTimeout(context.Background(), time.Second)
	defer stop()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				clk.advance(time.Millisecond)
				_, _ = s.auth.keys.lookup(ctx, kid)
			}
		}()
	}
	wg.Wait()
	s.api.setDown(false)
	waitFor(t, "the keys once the API server is back", func() bool {
		clk.advance(time.Second)
		_, err := s.auth.keys.lookup(context.Background(), kid)
		return err == nil
	})
}
