package vault

import (
	"sync"
	"testing"
)

// Vaults share no state: a fleet runs a thousand of them, and closes them
// concurrently. Under -race, two vaults publishing their empty snapshots
// at once raced on one shared snapshot (each set its held flag), and one
// vault's flag could show in another's.
func TestVaultsShareNoState(t *testing.T) {
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			v := New(Options{NoFallback: true})
			h := &counter{}
			v.OnLogin(h.login)
			v.Close()
		})
	}
	wg.Wait()
}
