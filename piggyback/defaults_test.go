package piggyback

import (
	"testing"
	"time"

	"github.com/authvault/authvault/internal/handlerconf"
)

// A hung exec plugin in a fallback kubeconfig must not keep its source
// logging in forever: every fallback registration has a timeout.
func TestDefaultsHaveATimeout(t *testing.T) {
	regs := Defaults()
	if len(regs) != 3 {
		t.Fatalf("Defaults() has %d registrations, want 3", len(regs))
	}
	if FallbackTimeout < 30*time.Second || FallbackTimeout > 2*time.Minute {
		t.Errorf("FallbackTimeout = %v, want about a minute", FallbackTimeout)
	}
	for _, r := range regs {
		s := handlerconf.Configure(r.Handler, r.Options...)
		if s.Timeout != FallbackTimeout {
			t.Errorf("registration %q: Timeout = %v, want %v", s.ID, s.Timeout, FallbackTimeout)
		}
	}
}
