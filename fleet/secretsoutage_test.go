package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/testkit/testwait"
)

// After the hub's API server was away for a while (a restart: the soak's
// issue 34), a kubeconfig Secret's change is seen soon after the hub is
// back, not after the informer's backoff, which grows over the refused
// attempts to half a minute or more; the outage is logged at the default
// level, once, and so is its end, and neither line holds a token.
func TestWatchSecretsAfterHubOutage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    SecretsOptions
		cluster string
		// put writes the cluster's Secret for api's current token.
		put func(h *hub, api *apiServer)
	}{{
		name:    "ClusterAPI",
		cluster: "capi/wl1",
		put: func(h *hub, api *apiServer) {
			h.put("capi", "wl1-kubeconfig", capiLabels("wl1"), map[string][]byte{"value": api.kubeconfig()})
		},
	}, {
		name:    "ArgoCD",
		opts:    SecretsOptions{Format: ArgoCD},
		cluster: "argocd/prod",
		put: func(h *hub, api *apiServer) {
			config := map[string]any{"bearerToken": *api.token.Load(), "tlsClientConfig": map[string]any{"caData": api.caPEM()}}
			h.put("argocd", "cluster-prod", argoLabels(), argoSecret("prod", api.srv.URL, config))
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testwait.Context(t)
			client := fake.NewClientset()
			outage := newOutageHub(&client.Fake, client.Tracker(), "secrets")
			h := &hub{t: t, client: client, logs: &testlog.Buffer{}}
			h.fleet = New(Options{Logger: h.logs.Logger(0)})
			opts := tc.opts
			opts.Client = client
			opts.Login = []login.Option{login.Backoff(10*time.Millisecond, time.Second)}
			wctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- h.fleet.WatchSecrets(wctx, opts) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
				h.fleet.Close()
			})
			select {
			case <-outage.watching:
			case <-time.After(testwait.Hang):
				t.Fatal("no watch began")
			}
			api := newAPIServer(t)
			tc.put(h, api)
			eventually(t, "the cluster is added", func() bool { return h.fleet.Vault(tc.cluster) != nil })
			cfg, err := h.fleet.RESTConfig(ctx, tc.cluster)
			if err != nil {
				t.Fatal(err)
			}
			if err := version(ctx, cfg); err != nil { // in use: a change refreshes it at once
				t.Fatal(err)
			}

			// Six refused attempts: client-go's reflector waits 0.8 s
			// after the first, doubling, so 25.6 s at least after the
			// sixth.
			back := outage.down(6)
			select {
			case <-back:
			case <-time.After(2 * time.Minute):
				t.Fatal("the watch did not try six times in two minutes")
			}
			newToken := api.rotate()
			tc.put(h, api)
			// Seen within 15 s of the hub's return: the watch retries the
			// hub every few seconds at most while it is away.
			returned := time.Now()
			deadline := returned.Add(15 * time.Second)
			for {
				c, err := h.fleet.Vault(tc.cluster).Select(ctx)
				if err == nil && c.Info.Token == newToken {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the Secret's change was not seen within 15 s of the hub's return; log:\n%s", h.logs.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("the change was seen %v after the hub's return", time.Since(returned).Round(time.Millisecond))
			if err := version(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			logs := h.logs.String()
			if n := strings.Count(logs, "watching kubeconfig Secrets failed"); n != 1 {
				t.Errorf("the outage is logged %d times, want once; log:\n%s", n, logs)
			}
			if !strings.Contains(logs, "watching kubeconfig Secrets again") {
				t.Errorf("the outage's end is not logged; log:\n%s", logs)
			}
			for _, tok := range api.tokens {
				if strings.Contains(logs, tok) {
					t.Errorf("the log holds a token; log:\n%s", logs)
				}
			}
		})
	}
}
