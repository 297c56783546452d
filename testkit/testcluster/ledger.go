package testcluster

import (
	"slices"
	"sync"
)

// Ledger is an AcceptFunc for Issuer.SetAccept that asks check about each
// token, as a cloud's authenticator asks its cloud, and keeps the answers:
// which tokens it accepted, which it rejected, and why.
type Ledger struct {
	check func(tok string) (user string, err error)

	mu       sync.Mutex      // guards the fields below
	accepted map[string]bool // tokens
	rejected []string        // tokens, in order
	why      []string        // why each was rejected: check's errors, which must hold no secret
}

// NewLedger returns a Ledger that asks check.
func NewLedger(check func(tok string) (user string, err error)) *Ledger {
	return &Ledger{check: check, accepted: map[string]bool{}}
}

// Accept is the AcceptFunc.
func (l *Ledger) Accept(tok string) (string, bool) {
	user, err := l.check(tok)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.rejected = append(l.rejected, tok)
		l.why = append(l.why, err.Error())
		return "", false
	}
	l.accepted[tok] = true
	return user, true
}

// Counts is how many different tokens were accepted and rejected, and why
// those were.
func (l *Ledger) Counts() (accepted, rejected int, why []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted), len(l.rejected), slices.Clone(l.why)
}

// Tokens are every token the ledger was asked about.
func (l *Ledger) Tokens() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	toks := slices.Clone(l.rejected)
	for tok := range l.accepted {
		toks = append(toks, tok)
	}
	return toks
}
