package addonauth

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHungAPIServer measures what callers get while the API server
// hangs (SIGSTOP): 100 tokens, all reviewed a moment before and their
// verdicts lapsed as the hang begins, asked by 32 clients over loopback
// for 20 s, with the default ReviewTimeout (5 s) and StaleIfError. It
// reports the answers a second, the slowest answer and the answers other
// than 200 (none is expected: every token has a stale verdict), with
// StaleWait at its default and at ReviewTimeout, which waits as every
// caller did before StaleWait. One run is 20 s:
//
//	go test -run '^$' -bench HungAPIServer -benchtime 1x ./addonauth
func BenchmarkHungAPIServer(b *testing.B) {
	for _, tc := range []struct {
		name string
		wait time.Duration
	}{
		{"StaleWait=default", 0},
		{"StaleWait=ReviewTimeout", 5 * time.Second},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				benchHang(b, tc.wait)
			}
		})
	}
}

func benchHang(b *testing.B, staleWait time.Duration) {
	const (
		tokens  = 100
		clients = 32
		hang    = 20 * time.Second
	)
	b.StopTimer()
	// The real clock, which the hang's onset moves past SuccessTTL.
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	s := newSetup(b, Options{SuccessTTL: 10 * time.Second, StaleWait: staleWait, now: now})
	toks := make([]string, tokens)
	for i := range toks {
		toks[i] = s.api.token(b, "team-a", fmt.Sprintf("caller-%d", i), audience, time.Hour)
		if resp, _ := s.get(b, toks[i], nil); resp.StatusCode != 200 {
			b.Fatalf("warm-up of token %d = %d", i, resp.StatusCode)
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer client.CloseIdleConnections()

	s.api.setHung(true)
	defer s.api.setHung(false)
	offset.Store(int64(11 * time.Second)) // every verdict has lapsed
	var (
		mu        sync.Mutex
		latencies []time.Duration
		refused   int
		wg        sync.WaitGroup
	)
	b.StartTimer()
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			var mine []time.Duration
			var bad int
			for i := c; time.Since(start) < hang; i += clients {
				req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/hello", nil)
				req.Header.Set("Authorization", "Bearer "+toks[i%tokens])
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
				if resp.StatusCode != 200 {
					bad++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			latencies = append(latencies, mine...)
			refused += bad
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "answers/s")
	b.ReportMetric(float64(latencies[len(latencies)-1].Milliseconds()), "max-ms")
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(refused), "non-200")
	b.ReportMetric(float64(s.api.reviews.Load()), "reviews")
}
