package vault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testwait"
)

// The model test drives the core alone; this one drives a whole vault the
// same random way, with goroutines: callers that select, get 401s and
// answers, Refresh, Ready, handlers registered late, handlers that fail,
// give nothing, short-lived credentials or hang past their timeout, and a
// fake clock stepped under all of them. The handlers check that they never
// run twice at once and are never called twice within their login floor;
// after the storm the vault serves again, and Close leaves no timer armed
// (goleak, in TestMain, sees the goroutines).
func TestRandomUseKeepsTheRules(t *testing.T) {
	for seed := range uint64(16) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomUse(t, seed) })
	}
}

// randomHandler is a login handler whose behaviour the test changes as it
// runs, and that reports what it must never see.
type randomHandler struct {
	id       string
	v        *Vault
	floor    time.Duration
	priority int
	mode     atomic.Int32 // see login
	inflight atomic.Int32
	errs     chan<- string

	mu       sync.Mutex // guards lastCall and calls
	lastCall time.Time  // the vault's clock at its last call, as the vault noted it
	calls    int
}

const (
	modeGive = iota
	modeFail
	modeNothing
	modeSlow // ignores its context a moment, then fails
	modeShort
	modes
)

func (h *randomHandler) login(ctx context.Context) (*login.ConnectionInfo, error) {
	if h.inflight.Add(1) != 1 {
		h.errs <- h.id + ": called while a call of it runs"
	}
	defer h.inflight.Add(-1)
	h.v.mu.Lock()
	called := h.v.core.lookup(h.id).lastCall // this call's start
	h.v.mu.Unlock()
	h.mu.Lock()
	if !h.lastCall.IsZero() && called.Sub(h.lastCall) < h.floor {
		h.errs <- fmt.Sprintf("%s: called %s after its last call, within its floor of %s", h.id, called.Sub(h.lastCall), h.floor)
	}
	h.lastCall = called
	h.calls++
	n := h.calls
	h.mu.Unlock()
	info := &login.ConnectionInfo{Server: "https://api.example", Token: fmt.Sprintf("%s-%d", h.id, n), Priority: h.priority}
	switch h.mode.Load() {
	case modeFail:
		return nil, errors.New("store down")
	case modeNothing:
		return nil, nil
	case modeSlow:
		time.Sleep(2 * time.Millisecond)
		return nil, errors.New("slow")
	case modeShort:
		info.Expiration = called.Add(500 * time.Millisecond)
	default:
		info.Expiration = called.Add(time.Duration(1+n%5) * time.Minute)
	}
	return info, nil
}

func randomUse(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 23))
	fallback := &counter{priority: 30}
	v, clk := testVault(t, Options{
		FirstLoginWait: time.Duration(rnd.IntN(3)) * time.Second,
		MaxWait:        2 * time.Second,
		KeepFallback:   rnd.IntN(2) == 0,
		Fallback:       []login.Registration{{Handler: fallback.login, Options: []login.Option{login.ID("fallback")}}},
	})
	errs := make(chan string, 100)
	var handlers []*randomHandler
	var hmu sync.Mutex
	register := func(id string) {
		h := &randomHandler{id: id, v: v, floor: time.Duration(1+rnd.IntN(2)) * time.Second, priority: 10 * rnd.IntN(3), errs: errs}
		v.OnLogin(h.login, login.ID(h.id), login.Backoff(h.floor, 10*time.Second),
			login.Timeout(time.Duration(rnd.IntN(2))*time.Second))
		hmu.Lock()
		handlers = append(handlers, h)
		hmu.Unlock()
	}
	for i := range rnd.IntN(4) {
		register(fmt.Sprint("h", i))
	}
	late := 0

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 4 {
		r := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for ctx.Err() == nil {
				randomEvent(ctx, r, v, clk, func() *randomHandler {
					hmu.Lock()
					defer hmu.Unlock()
					if len(handlers) == 0 {
						return nil
					}
					return handlers[r.IntN(len(handlers))]
				})
				if w == 0 && r.IntN(40) == 0 {
					hmu.Lock()
					late++
					id := fmt.Sprint("late", late)
					hmu.Unlock()
					register(id)
				}
				time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
			}
		})
	}
	wg.Wait()

	for _, h := range handlers {
		h.mode.Store(modeGive)
	}
	deadline := time.Now().Add(testwait.Hang)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, err := v.Select(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no credential once the handlers heal: %v", err)
		}
		clk.Step(time.Second)
	}
	v.Close()
	if clk.HasWaiters() {
		t.Error("a timer is still armed on the vault's clock after Close")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// randomEvent is one thing that happens to a vault in use.
func randomEvent(ctx context.Context, r *rand.Rand, v *Vault, clk *testingclock.FakeClock, handler func() *randomHandler) {
	switch r.IntN(10) {
	case 0:
		clk.Step(time.Duration(r.IntN(3000)) * time.Millisecond)
	case 1:
		v.Refresh()
	case 2:
		if h := handler(); h != nil {
			h.mode.Store(int32(r.IntN(modes)))
		}
	case 3:
		_ = v.Ready(nil)
	default:
		ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		c, err := v.Select(ctx)
		cancel()
		if err != nil {
			return
		}
		switch r.IntN(4) {
		case 0:
			v.invalidate(ctx, c, unauthorized(c, &http.Response{Status: "401 Unauthorized", StatusCode: http.StatusUnauthorized}), by401)
		case 1:
			v.served(c)
		}
	}
}
