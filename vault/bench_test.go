package vault

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/authvault/authvault/login"
)

// benchVault is a real-clock vault holding n credentials of one priority.
func benchVault(b *testing.B, n int, lifetime time.Duration) *Vault {
	b.Helper()
	v := New(Options{})
	b.Cleanup(v.Close)
	for i := range n {
		h := &counter{lifetime: lifetime}
		v.OnLogin(h.login, login.ID(fmt.Sprint("h", i)))
	}
	if _, err := v.Select(context.Background()); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for v.snap.Load().size() != n {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d credentials arrived", v.snap.Load().size(), n)
		}
		time.Sleep(time.Millisecond)
	}
	return v
}

// BenchmarkSelect is the hot path: every request of every client selects.
func BenchmarkSelect(b *testing.B) {
	for _, lifetime := range []time.Duration{0, time.Hour} {
		for _, n := range []int{1, 10, 100} {
			name := fmt.Sprintf("creds=%d/expiring=%t", n, lifetime != 0)
			b.Run(name+"/serial", func(b *testing.B) {
				v := benchVault(b, n, lifetime)
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := v.Select(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				v := benchVault(b, n, lifetime)
				ctx := context.Background()
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := v.Select(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkReloginHerd: 10,000 callers arrive at an emptied vault whose
// handler answers at once; an op is the time until the last of them holds
// a credential.
func BenchmarkReloginHerd(b *testing.B) {
	const callers = 10000
	v := New(Options{})
	b.Cleanup(v.Close)
	h := &counter{}
	v.OnLogin(h.login, login.ID("herd"))
	ctx := context.Background()
	if _, err := v.Select(ctx); err != nil { // the first login is not the herd's
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		cred, err := v.Select(ctx)
		if err != nil {
			b.Fatal(err)
		}
		_ = v.Invalidate(ctx, cred, nil) // the vault is empty now
		var ready, done sync.WaitGroup
		gate := make(chan struct{})
		ready.Add(callers)
		done.Add(callers)
		for range callers {
			go func() {
				defer done.Done()
				ready.Done()
				<-gate
				if _, err := v.Select(ctx); err != nil {
					b.Error(err)
				}
			}()
		}
		ready.Wait()
		b.StartTimer()
		close(gate)
		done.Wait()
	}
	b.ReportMetric(float64(h.calls.Load()-1)/float64(b.N), "logins/op")
}
