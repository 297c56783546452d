package hub

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/hack/soak/report"
	"github.com/authvault/authvault/testkit/testcluster"
)

// The faults. Each causes its fault, waits out its length (hold) where it
// has one, undoes it, and returns what it may have broken: the scopes of
// report.Fault, with the grace after its end during which a caller may
// still meet it.

// settleGrace is how long after a fault that stopped the API server its
// callers may still fail: watches reconnect, leader election renews, a
// request that waited on the dead connection times out.
const settleGrace = 30 * time.Second

// pluginGrace is how long after a plugin fault ends a caller may still
// fail: client-go runs its plugin on the next request (the plugin's
// latency); a vault's handler that failed through the fault tries again
// after its backoff (1 s doubling, with jitter: up to 32 s after 30 s of
// failures), and a caller waiting for it reports at its own deadline. The
// 60-min soak's one unexplained failure was such a caller, 18 s after a
// 30-s plugin failure ended, when the grace was the latency and 15 s.
func (h *Hub) pluginGrace() time.Duration { return h.opts.PluginLatency + 45*time.Second }

// profilesScope is the fleet's ClusterProfile clusters, whose provider is
// the plugin: a Secret's cluster has a token of its own.
const profilesScope = "namespace:" + profilesNamespace

func fault(kind, scope string, start time.Time, grace time.Duration) report.Fault {
	return report.Fault{Kind: kind, Scope: scope, Start: start, End: time.Now(), Grace: grace}
}

// Revoke revokes the hub's credentials in use (every live token of both
// plugins' endpoints, which the ClusterProfile clusters use too, and the
// token file's) and the tokens of n fleet clusters, whose Secrets are then
// rewritten at once, as Cluster API's owner would after a leak.
func (h *Hub) Revoke(ctx context.Context, n int) ([]report.Fault, error) {
	start := time.Now()
	var toks []string
	for _, e := range h.endpoints {
		toks = append(toks, e.live()...)
	}
	h.mu.Lock()
	toks = append(toks, h.tokenFileToken)
	h.mu.Unlock()
	grace := testcluster.ReviewCacheTTL + h.pluginGrace()
	picked := h.members.pick(n)
	for _, name := range picked {
		h.members.mu.Lock()
		toks = append(toks, h.members.tokens[name])
		h.members.mu.Unlock()
	}
	for _, tok := range toks {
		h.cluster.Issuer.Revoke(tok)
	}
	faults := []report.Fault{fault("revocation", "hub", start, grace), fault("revocation", profilesScope, start, grace)}
	for _, name := range picked {
		if _, err := h.members.write(ctx, name); err != nil {
			return faults, err
		}
		faults = append(faults, fault("revocation", "cluster:"+FleetName(name), start, grace))
	}
	return faults, nil
}

// RecreateSecrets deletes the kubeconfig Secrets of n fleet clusters and
// creates them again after gap, with new tokens.
func (h *Hub) RecreateSecrets(ctx context.Context, n int, gap time.Duration) ([]report.Fault, error) {
	start := time.Now()
	picked := h.members.pick(n)
	secrets := h.client().core.CoreV1().Secrets(secretsNamespace)
	h.members.mu.Lock()
	for _, name := range picked {
		h.members.paused[name] = true
	}
	h.members.mu.Unlock()
	defer func() {
		h.members.mu.Lock()
		for _, name := range picked {
			delete(h.members.paused, name)
		}
		h.members.mu.Unlock()
	}()
	for _, name := range picked {
		if err := secrets.Delete(ctx, secretName(name), metav1.DeleteOptions{}); err != nil {
			return nil, fmt.Errorf("hub: deleting Secret %s: %w", secretName(name), err)
		}
	}
	sleep(ctx, gap)
	var faults []report.Fault
	for _, name := range picked {
		if _, err := h.members.write(ctx, name); err != nil {
			return faults, err
		}
		faults = append(faults, fault("secret-recreate", "cluster:"+FleetName(name), start, 15*time.Second))
	}
	return faults, nil
}

// PluginFault puts both plugins' endpoints in mode (Failing, Hanging or
// Partition) for hold.
func (h *Hub) PluginFault(ctx context.Context, mode Mode, hold time.Duration) []report.Fault {
	kind := map[Mode]string{Failing: "plugin-failing", Hanging: "plugin-hanging", Partition: "partition"}[mode]
	start := time.Now()
	for _, e := range h.endpoints {
		e.setMode(mode)
	}
	sleep(ctx, hold)
	for _, e := range h.endpoints {
		e.setMode(Serving)
	}
	grace := h.pluginGrace()
	if mode == Hanging {
		// client-go has no time limit on a plugin: its runs hung until now
		// and answer from now on.
		grace += h.opts.PluginLatency
	}
	return []report.Fault{fault(kind, "hub", start, grace), fault(kind, profilesScope, start, grace)}
}

// RestartAPIServer stops the API server and starts it again after down.
func (h *Hub) RestartAPIServer(down time.Duration) ([]report.Fault, error) {
	start := time.Now()
	err := h.cluster.RestartAPIServer(down)
	return []report.Fault{fault("apiserver-restart", "all", start, settleGrace)}, err
}

// RotateCA restarts the API server with a serving certificate of a new CA,
// then hands the new CA out: the CA file, every kubeconfig Secret and
// ClusterProfile.
func (h *Hub) RotateCA(ctx context.Context, down time.Duration) ([]report.Fault, error) {
	start := time.Now()
	ca, err := h.cluster.RotateServingCA(down)
	if err != nil {
		return []report.Fault{fault("ca-rotation", "all", start, settleGrace)}, err
	}
	h.mu.Lock()
	h.caData, h.clients = ca, nil
	h.mu.Unlock()
	if err := writeFile(h.caFile, ca); err != nil {
		return nil, err
	}
	err = h.members.rewriteAll(ctx)
	return []report.Fault{fault("ca-rotation", "all", start, settleGrace)}, err
}

// ChangeIssuer restarts the API server with a new service-account issuer,
// every earlier one still accepted (the documented way to change it): a
// token of an issuer dropped too soon is refused however long it has left
// (the soak's callers hold theirs 8 of their 10 minutes), which would be
// the harness's fault, not the callers'.
func (h *Hub) ChangeIssuer(ctx context.Context, down time.Duration) ([]report.Fault, error) {
	start := time.Now()
	next := fmt.Sprintf("https://issuer-%d.soak.example", len(h.issuers))
	h.issuers = append([]string{next}, h.issuers...)
	err := h.cluster.RestartAPIServerWithIssuers(down, h.issuers...)
	return []report.Fault{fault("issuer-change", "all", start, settleGrace)}, err
}

// pick is n of the Secrets' clusters, at random.
func (m *members) pick(n int) []string {
	names := slices.Clone(m.secrets)
	rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	return names[:min(n, len(names))]
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
