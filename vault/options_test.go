package vault

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
	"github.com/authvault/authvault/login"
)

// Every number in Options follows one rule, as each field's comment says:
// zero is the default, a negative value is none, a positive one is kept.
func TestOptionsNumbersZeroIsTheDefaultNegativeIsNone(t *testing.T) {
	type numbers struct {
		leeway, transportGrace, firstLoginWait, readyGrace, maxWait time.Duration
		invalidatedRefused                                          int
	}
	of := func(o Options) numbers {
		o = o.withDefaults()
		return numbers{o.Leeway, o.TransportGrace, o.FirstLoginWait, o.ReadyGrace, o.MaxWait, o.InvalidatedRefused}
	}
	tests := []struct {
		name string
		in   Options
		want numbers
	}{
		{"zero", Options{NoFallback: true}, numbers{10 * time.Second, time.Minute, 10 * time.Second, time.Minute, time.Minute, 5}},
		{"negative", Options{NoFallback: true, Leeway: -1, TransportGrace: -1, FirstLoginWait: -time.Hour, ReadyGrace: -1, MaxWait: -1, InvalidatedRefused: -3}, numbers{}},
		{"positive", Options{NoFallback: true, Leeway: 1, TransportGrace: 2, FirstLoginWait: 3, ReadyGrace: 4, MaxWait: 5, InvalidatedRefused: 6}, numbers{1, 2, 3, 4, 5, 6}},
	}
	for _, tt := range tests {
		if got := of(tt.in); got != tt.want {
			t.Errorf("%s: withDefaults() = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// InvalidatedRefused negative: the vault refuses none, so a handler that
// gives the invalidated token again is taken back.
func TestInvalidatedRefusedNegativeRefusesNone(t *testing.T) {
	v, clk := testVault(t, Options{InvalidatedRefused: -1})
	h := &counter{}
	h.same.Store(true)
	v.OnLogin(h.login, login.Retries(0))
	c := mustSelect(t, v)
	_ = v.Invalidate(context.Background(), c, errors.New("401 Unauthorized"))
	clk.Step(handlerconf.DefaultBackoffInitial) // past the login floor
	again := mustSelect(t, v)
	if again == c || again.Info.Token != c.Info.Token {
		t.Errorf("Select() = %v, want a new credential with the invalidated token, taken back", again)
	}
}

// ReadyGrace negative: no grace, a vault that is logging in without a
// credential is not ready.
func TestReadyGraceNegativeIsNoGrace(t *testing.T) {
	v, _ := testVault(t, Options{ReadyGrace: -1})
	h := &counter{block: make(chan struct{})}
	v.OnLogin(h.login, login.ID("slow"))
	var le *LoginError
	if err := v.Ready(nil); !errors.As(err, &le) {
		t.Errorf("Ready() = %v as the first login starts, with no grace; want a *LoginError", err)
	}
	close(h.block)
	eventually(t, "the credential", func() bool { return v.Ready(nil) == nil })
}
