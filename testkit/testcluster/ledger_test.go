package testcluster

import (
	"errors"
	"slices"
	"testing"
)

func TestLedger(t *testing.T) {
	l := NewLedger(func(tok string) (string, error) {
		if tok == "good" || tok == "also-good" {
			return "user-" + tok, nil
		}
		return "", errors.New("revoked")
	})
	for _, tok := range []string{"good", "bad", "good", "also-good"} {
		user, ok := l.Accept(tok)
		if ok != (tok != "bad") || (ok && user != "user-"+tok) {
			t.Errorf("Accept(%q) = %q, %t", tok, user, ok)
		}
	}
	accepted, rejected, why := l.Counts()
	toks := l.Tokens()
	slices.Sort(toks)
	if accepted != 2 || rejected != 1 || !slices.Equal(why, []string{"revoked"}) || !slices.Equal(toks, []string{"also-good", "bad", "good"}) {
		t.Errorf("counts %d, %d, %q; tokens %q", accepted, rejected, why, toks)
	}
}
