package login

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func namedHandler(context.Context) (*ConnectionInfo, error) { return nil, nil }

func TestConfigureDefaults(t *testing.T) {
	s := Configure(namedHandler)
	want := Settings{ID: "login.namedHandler", Retries: Unlimited, BackoffInitial: time.Second, BackoffMax: time.Minute}
	if s != want {
		t.Errorf("Configure() = %+v, want %+v", s, want)
	}
}

func TestConfigureOptions(t *testing.T) {
	s := Configure(namedHandler, ID("mine"), Retries(3), Backoff(time.Millisecond, time.Second), Timeout(5*time.Second))
	want := Settings{ID: "mine", Retries: 3, BackoffInitial: time.Millisecond, BackoffMax: time.Second, Timeout: 5 * time.Second}
	if s != want {
		t.Errorf("Configure() = %+v, want %+v", s, want)
	}
}

func TestConfigureRepairsNonsense(t *testing.T) {
	s := Configure(namedHandler, Retries(-7), Backoff(-1, -1))
	if s.Retries != Unlimited || s.BackoffInitial != DefaultBackoffInitial || s.BackoffMax != DefaultBackoffInitial {
		t.Errorf("Configure() = %+v, want unlimited retries and a 1 s backoff", s)
	}
}

func TestFuncNameOfClosures(t *testing.T) {
	got := FuncName(func(context.Context) (*ConnectionInfo, error) { return nil, nil })
	if !strings.HasPrefix(got, "login.TestFuncNameOfClosures.func") {
		t.Errorf("FuncName() = %q, want the enclosing function's name", got)
	}
	var s source
	if got := FuncName(s.login); got != "login.source.login" {
		t.Errorf("FuncName(method value) = %q, want login.source.login", got)
	}
	if got := FuncName(nil); got != "handler" {
		t.Errorf("FuncName(nil) = %q, want handler", got)
	}
}

func TestPermanentAndTemporary(t *testing.T) {
	base := errors.New("base")
	p := Permanent(base)
	var pe *PermanentError
	if !errors.As(p, &pe) || !errors.Is(p, base) || p.Error() != "base" {
		t.Errorf("Permanent() = %v, want a *PermanentError wrapping base", p)
	}
	tmp := Temporary(base, 3*time.Second)
	var te *TemporaryError
	if !errors.As(tmp, &te) || te.Delay != 3*time.Second || !errors.Is(tmp, base) {
		t.Errorf("Temporary() = %v, want a *TemporaryError of 3s wrapping base", tmp)
	}
	if got, want := tmp.Error(), "base"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

type source struct{}

func (source) login(context.Context) (*ConnectionInfo, error) { return nil, nil }
