package login

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
)

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

// A Named handler goes by its name and label unless ID says otherwise;
// asking its name calls nothing, and a call reaches the handler it wraps.
func TestNamed(t *testing.T) {
	calls := 0
	inner := func(context.Context) (*ConnectionInfo, error) {
		calls++
		return &ConnectionInfo{Server: "https://a"}, nil
	}
	h := Named("token file /var/run/t", "token file", inner)
	if s := handlerconf.Configure[Option](h); s.ID != "token file /var/run/t" || s.Label != "token file" {
		t.Errorf("ID %q, label %q; want the name and the label", s.ID, s.Label)
	}
	if s := handlerconf.Configure[Option](h, ID("mine")); s.ID != "mine" || s.Label != "mine" {
		t.Errorf("with ID: ID %q, label %q; want mine, mine", s.ID, s.Label)
	}
	if calls != 0 {
		t.Errorf("asking the name called the handler %d times", calls)
	}
	if info, err := h(context.Background()); err != nil || info.Server != "https://a" || calls != 1 {
		t.Errorf("h() = %v, %v after %d calls; want the wrapped handler's credential", info, err, calls)
	}
	// Without a name, and a plain function: the function's name.
	if s := handlerconf.Configure[Option](Named("", "", inner)); s.ID != "login.TestNamed.func1" || s.Label != s.ID {
		t.Errorf("an empty name: ID %q, label %q; want the wrapped function's name for both", s.ID, s.Label)
	}
	if s := handlerconf.Configure[Option](Handler(inner)); s.ID != "login.TestNamed.func1" || s.Label != s.ID {
		t.Errorf("a plain function: ID %q, label %q; want its function's name for both", s.ID, s.Label)
	}
}

// A name without a label is no label: a name says what the handler reads
// (a path, an object's name), which would make a series per file or
// object. The label is then the wrapped function's name, as for a plain
// function.
func TestNamedWithoutLabel(t *testing.T) {
	inner := func(context.Context) (*ConnectionInfo, error) { return nil, nil }
	for _, path := range []string{"/var/run/a", "/var/run/b"} {
		s := handlerconf.Configure[Option](Named("token file "+path, "", inner))
		if s.ID != "token file "+path || s.Label != "login.TestNamedWithoutLabel.func1" {
			t.Errorf("Named(%q, \"\"): ID %q, label %q; want the name and the wrapped function's name", "token file "+path, s.ID, s.Label)
		}
	}
}
