package clockctx

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestNow(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := Now(With(context.Background(), testingclock.NewFakePassiveClock(at))); !got.Equal(at) {
		t.Errorf("Now() = %v, want the context's clock %v", got, at)
	}
	if got := Now(context.Background()); time.Since(got) > time.Minute {
		t.Errorf("Now() without a clock = %v, want the real time", got)
	}
}
