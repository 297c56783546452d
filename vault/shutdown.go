package vault

import (
	"context"
	"sync/atomic"
	"time"
)

// Shutdown timing: the vault closes once no request has asked it for a
// credential for shutdownQuiet, and no later than shutdownMax after
// Shutdown began.
const (
	shutdownQuiet = 250 * time.Millisecond
	shutdownMax   = 5 * time.Second
)

// Shutdown closes the vault once the program has stopped using it: it
// waits until no request has asked for a credential for a quarter of a
// second, at most five seconds or until ctx ends, then calls Close. Until
// then the vault serves as before.
//
// Call it after a controller-runtime manager's Start has returned, as
// examples/operator does with defer: the manager's shutdown goes on for a
// moment after Start returns (its event broadcaster sends the events that
// leader election and the controllers recorded last), and with Close
// those requests fail ("vault: the vault is closed"). A manager.Runnable
// could not help: the manager stops its runnables before it releases its
// lease and flushes its events.
//
// It returns ctx's error when ctx ended first; the vault is closed either
// way. A vault already closed, or closed meanwhile, ends the wait at once.
func (v *Vault) Shutdown(ctx context.Context) error {
	defer v.Close()
	v.drain.on.Store(true)
	deadline := time.NewTimer(shutdownMax)
	defer deadline.Stop()
	tick := time.NewTicker(shutdownQuiet)
	defer tick.Stop()
	last := v.drain.asked.Load()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-v.life.ctx.Done():
			// Closed meanwhile: requests get ErrClosed, nothing to wait for.
			return nil
		case <-deadline.C:
			return nil
		case <-tick.C:
			n := v.drain.asked.Load()
			if n == last {
				return nil
			}
			last = n
		}
	}
}

// drain is what Shutdown watches: on once it waits, asked then counting
// the requests for a credential (Select counts them; otherwise it costs
// one atomic load), to close once they stop.
type drain struct {
	on    atomic.Bool
	asked atomic.Uint64
}
