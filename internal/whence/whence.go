// Package whence lets a built-in login handler say where its credential
// came from ("kubeconfig /home/me/.kube/config, context \"kind-dev\""), for
// the project's packages only: the vault names it in the one INFO line
// that says a fallback serves, so that a start on the kubeconfig says
// which file and context, and not only which fallback.
//
// A ConnectionInfo has no field for it: where a credential came from is
// for the log, not for the request, and a user's handler has its handler
// ID to say it. The vault puts a Note in the handler's context; the
// handler writes into it with Say; a handler without one (called by a
// user, in a test) says nothing to no one.
package whence

import (
	"context"
	"sync"
)

// Note holds what a handler said of where its credential came from. It is
// safe for concurrent use: a call the vault abandoned at its timeout may
// still say it after the vault has read it.
type Note struct {
	mu    sync.Mutex // guards where
	where string
}

type noteKey struct{}

// WithNote returns ctx with a new Note that Say writes into.
func WithNote(ctx context.Context) (context.Context, *Note) {
	n := &Note{}
	return context.WithValue(ctx, noteKey{}, n), n
}

// Say notes where the credential the handler returns came from, in the
// Note of ctx, if it has one. It must name no secret.
func Say(ctx context.Context, where string) {
	if n, ok := ctx.Value(noteKey{}).(*Note); ok {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.where = where
	}
}

// Where is what the handler said, or "".
func (n *Note) Where() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.where
}
