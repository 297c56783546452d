package whence

import (
	"context"
	"testing"
)

// Say reaches the Note of its context, through derived contexts, and is a
// no-op without one.
func TestSay(t *testing.T) {
	ctx, n := WithNote(context.Background())
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	Say(derived, `kubeconfig /a/config, context "c"`)
	if got, want := n.Where(), `kubeconfig /a/config, context "c"`; got != want {
		t.Errorf("Where() = %q, want %q", got, want)
	}
	Say(context.Background(), "nowhere") // no Note: nothing happens
	if got := new(Note).Where(); got != "" {
		t.Errorf("a new Note's Where() = %q, want empty", got)
	}
}
