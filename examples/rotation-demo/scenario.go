package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/authvault/authvault/testkit/rotation"
	"github.com/authvault/authvault/testkit/testcluster"
)

// scenario is what the issuer does to both sides while their workloads run.
type scenario struct {
	name  string
	what  string // the line that says what it shows
	title string // the chart's, shorter
	// run is how long the workloads run, after both sides' first login.
	run         time.Duration
	ttl         time.Duration // token lifetime; 0: tokens never expire
	revokeAfter time.Duration // 0: never revoked
	// The issuer is down for outage, from outageLead before the expiry of
	// client-go's first token (0: no outage).
	outage, outageLead time.Duration
	operator           bool // run the operator through the vault too
}

// side is one of the two clients of a scenario and what it went through.
type side struct {
	name     string
	endpoint *endpoint
	counters counters
	// Set once the scenario has ended.
	samples []sample
	figures figures
}

// outcome of a scenario, for its table and its chart.
type result struct {
	scenario *scenario
	sides    []*side
	origin   time.Time     // time zero of samples and chart: before the first logins
	latency  time.Duration // of a plugin run
	// The outage, as offsets from origin; both zero when there was none.
	downFrom, downTo time.Duration
}

// env is what every scenario shares.
type env struct {
	cluster   *testcluster.Cluster
	admin     kubernetes.Interface
	namespace string
	plugin    string // the demo's own binary
	workers   int
	latency   time.Duration // of every plugin run
	operator  *operator
	progress  *progress
}

// runScenario runs sc through a vault and through plain client-go at once,
// each side with its own issuer endpoint and the same plugin.
func (e *env) runScenario(ctx context.Context, sc *scenario) (*result, error) {
	res := &result{scenario: sc, origin: time.Now(), latency: e.latency}
	var down atomic.Bool
	av := &side{name: "authvault", endpoint: newEndpoint(e.cluster.Issuer, sc.ttl, sc.revokeAfter, e.latency, &down)}
	cg := &side{name: "client-go exec plugin", endpoint: newEndpoint(e.cluster.Issuer, sc.ttl, sc.revokeAfter, e.latency, &down)}
	res.sides = []*side{av, cg}
	defer av.endpoint.Close()
	defer cg.endpoint.Close()

	v := rotation.PluginVault(e.cluster, e.exec(av.endpoint))
	defer v.Close() // after everything that uses it has stopped: deferred first, runs last
	clientGo := rotation.PluginConfig(e.cluster, e.exec(cg.endpoint))

	// Both sides log in first (the plugin runs once each, at once), so that
	// the tables count what happens after a client is up.
	var avCS, cgCS kubernetes.Interface
	var avCfg *rest.Config
	var avErr, cgErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		if avCfg, avErr = v.RESTConfig(ctx); avErr == nil {
			avCS, avErr = clientset(avCfg)
		}
	})
	wg.Go(func() {
		if cgCS, cgErr = clientset(clientGo); cgErr == nil {
			_, cgErr = cgCS.CoreV1().Namespaces().Get(ctx, e.namespace, metav1.GetOptions{})
		}
	})
	wg.Wait()
	if avErr != nil {
		return nil, fmt.Errorf("the vault's first login: %w", avErr)
	}
	if cgErr != nil {
		return nil, fmt.Errorf("client-go's first request: %w", cgErr)
	}

	if sc.operator {
		stop, err := e.operator.start(ctx, rest.CopyConfig(avCfg))
		if err != nil {
			return nil, err
		}
		defer stop() // before the vault closes
	}

	var timeline sync.WaitGroup // the outage, owned by this scenario
	defer timeline.Wait()
	work, cancel := context.WithTimeout(ctx, sc.run)
	defer cancel() // before timeline.Wait
	if sc.outage > 0 {
		// client-go's token expires when its expirationTimestamp says:
		// the issue plus ttl, to the second below (RFC 3339).
		expiry := cg.endpoint.Runs()[0].end.Add(sc.ttl).Truncate(time.Second)
		from := expiry.Add(-sc.outageLead)
		res.downFrom, res.downTo = from.Sub(res.origin), from.Add(sc.outage).Sub(res.origin)
		timeline.Go(func() {
			if !sleep(work, time.Until(from)) {
				return
			}
			down.Store(true)
			defer down.Store(false)
			sleep(work, sc.outage)
		})
	}
	stopProgress := e.progress.start(sc, res.origin, res.sides)
	var sides sync.WaitGroup
	prefix := fmt.Sprintf("%s-%d", sc.name, time.Now().UnixNano()%1e6)
	sides.Go(func() {
		av.samples = workload(work, avCS, e.namespace, prefix+"-av", e.workers, res.origin, &av.counters)
	})
	sides.Go(func() {
		cg.samples = workload(work, cgCS, e.namespace, prefix+"-cg", e.workers, res.origin, &cg.counters)
	})
	sides.Wait()
	stopProgress()
	for _, s := range res.sides {
		s.figures = summarize(s.samples, s.endpoint.Runs())
	}
	return res, ctx.Err()
}

// exec is the kubeconfig exec section that runs the demo as a plugin
// fetching from ep.
func (e *env) exec(ep *endpoint) *clientcmdapi.ExecConfig {
	return &clientcmdapi.ExecConfig{
		Command: e.plugin, APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		Env:             []clientcmdapi.ExecEnvVar{{Name: pluginModeEnv, Value: "fetch"}, {Name: pluginURLEnv, Value: ep.URL()}},
	}
}

// clientset is a client whose transport, its authenticating layer
// included, is metered, without client-go's rate limit, which would
// measure itself rather than the credentials.
func clientset(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	hc.Transport = metered{hc.Transport}
	return kubernetes.NewForConfigAndClient(cfg, hc)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
