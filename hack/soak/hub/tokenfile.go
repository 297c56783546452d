package hub

import (
	"context"
	"time"
)

// The token file: rewritten two thirds into its token's life, as kubelet
// rewrites a projected ServiceAccount token before it expires.

func (h *Hub) rotateTokenFile() error {
	life := h.tokenLife()
	tok := h.issue(life)
	if err := writeFile(h.tokenFile, []byte(tok)); err != nil {
		return err
	}
	h.mu.Lock()
	h.tokenFileToken, h.tokenFileNext = tok, time.Now().Add(life*2/3)
	h.mu.Unlock()
	return nil
}

func (h *Hub) tokenFileLoop(ctx context.Context) {
	for {
		h.mu.Lock()
		next := h.tokenFileNext
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		if err := h.rotateTokenFile(); err != nil {
			h.opts.Logf("hub: rewriting the token file: %v", err)
			h.mu.Lock()
			h.tokenFileNext = time.Now().Add(time.Second)
			h.mu.Unlock()
		}
	}
}
