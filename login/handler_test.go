package login

import (
	"errors"
	"testing"
	"time"
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
