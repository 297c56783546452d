// Command rotation-demo shows what callers go through while their
// credentials are revoked, expire or cannot be renewed, through authvault
// and through plain client-go with the same exec credential plugin, on an
// embedded kube-apiserver, draws it and, with --json, writes the figures
// and the machine they ran on (the README quotes docs/demo.json, one run's).
//
//	make demo                      # builds the envtest binaries if missing, runs ~2.5 min
//	make demo DEMO_FLAGS="--scenarios expiry --expiry-run 30s --plugin-latency 2s"
//	go run . --kubeconfig ~/.kube/config   # a workload through a vault on a real cluster
//
// Each scenario runs both sides at once, each with its own issuer endpoint
// that the demo's binary, run as the plugin, fetches tokens from:
//
//   - revocation: every token is revoked soon after its issue;
//   - expiry: tokens expire, and the plugin takes a second per run;
//   - outage: the issuer fails for a while around client-go's token's
//     expiry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/authvault/authvault/testkit/testcluster"
)

func main() {
	if os.Getenv(pluginModeEnv) == "fetch" {
		os.Exit(plugin(os.Getenv(pluginURLEnv)))
	}
	// The demo's output is its tables: controller-runtime and client-go
	// (klog) log nothing of their own, and neither does the vault (its
	// zero Logger discards). controller-runtime complains on stderr, with a
	// stack trace, when a log line finds no logger set.
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	// A flag set of the demo's own: the packages it links register theirs
	// (Ginkgo's, through the test cluster) on flag.CommandLine, and --help
	// would list them all.
	var o options
	fs := flag.NewFlagSet("rotation-demo", flag.ExitOnError)
	o.register(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: it exits on a bad flag
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	var err error
	if o.kubeconfig != "" {
		err = realCluster(ctx, o.kubeconfig, o.workers, o.duration)
	} else {
		err = embedded(ctx, &o)
	}
	if ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "\nrotation-demo:", err)
		os.Exit(1)
	}
}

// options are the demo's flags.
type options struct {
	scenarios     string
	workers       int
	latency       time.Duration
	revocationRun time.Duration
	revokeAfter   time.Duration
	expiryRun     time.Duration
	tokenLife     time.Duration
	outage        time.Duration
	outageLife    time.Duration
	chart         string
	json          string
	kubeconfig    string        // a real cluster instead of the scenarios
	duration      time.Duration // the workload on a real cluster
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.scenarios, "scenarios", "revocation,expiry,outage", "the scenarios to run, in this order")
	fs.IntVar(&o.workers, "workers", 8, "concurrent workers per side creating, updating, listing and deleting ConfigMaps")
	fs.DurationVar(&o.latency, "plugin-latency", time.Second, "how long each run of the credential plugin takes")
	fs.DurationVar(&o.revocationRun, "revocation-run", 24*time.Second, "revocation: how long the workloads run")
	fs.DurationVar(&o.revokeAfter, "revoke-after", 2*time.Second, "revocation: how long after its issue a token is revoked")
	fs.DurationVar(&o.expiryRun, "expiry-run", 45*time.Second, "expiry: how long the workloads run")
	fs.DurationVar(&o.tokenLife, "token-life", 20*time.Second, "expiry: how long a token lives")
	fs.DurationVar(&o.outage, "outage", 15*time.Second, "outage: how long the issuer fails; the scenario runs until client-go is back")
	fs.DurationVar(&o.outageLife, "outage-token-life", time.Minute,
		"outage: how long a token lives (much shorter, and the vault's token may run out during the outage too)")
	fs.StringVar(&o.chart, "chart", "rotation-demo.svg", "where to write the chart (.svg or .png; several, comma-separated)")
	fs.StringVar(&o.json, "json", "", "where to write the run's figures and the machine they ran on, as JSON (none if empty)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "run a workload through a vault against this cluster instead of the scenarios")
	fs.DurationVar(&o.duration, "duration", time.Minute, "with --kubeconfig: how long the workload runs")
}

// lineWidth is where the demo's prose wraps.
const lineWidth = 100

// outageLead is how long before client-go's token expires the issuer goes
// down: the token still has time left, as the vault's has. A third of the
// outage at most, so that client-go's expiry falls well inside it.
func (o *options) outageLead() time.Duration { return min(5*time.Second, o.outage/3) }

// picked are the scenarios the flags ask for.
func (o *options) picked() ([]*scenario, error) {
	all := map[string]*scenario{
		"revocation": {
			name: "revocation", run: o.revocationRun, revokeAfter: o.revokeAfter, operator: true,
			title: fmt.Sprintf("every token revoked %v after its issue", o.revokeAfter),
			what: fmt.Sprintf("every token is revoked %v after its issue and rejected within %v more (the API server's review cache): "+
				"client-go hands callers the 401 that makes it rerun its plugin; the vault retries those requests with the new token. "+
				"An operator runs through the same vault.", o.revokeAfter, testcluster.ReviewCacheTTL),
		},
		"expiry": {
			name: "expiry", run: o.expiryRun, ttl: o.tokenLife,
			title: fmt.Sprintf("tokens live %v, the plugin takes %v", o.tokenLife, o.latency),
			what: fmt.Sprintf("tokens live %v and the plugin takes %v per run: client-go runs it on the request that finds its token expired, "+
				"and every request in flight waits; the vault runs it in the background before expiry.", o.tokenLife, o.latency),
		},
		"outage": {
			name: "outage", ttl: o.outageLife, outage: o.outage, outageLead: o.outageLead(),
			// until client-go's token has expired, the issuer is back and
			// client-go has run its plugin again
			run:   o.outageLife - o.outageLead() + o.outage + o.latency + 3*time.Second,
			title: fmt.Sprintf("the issuer fails for %v around client-go's token's expiry (tokens live %v)", o.outage, o.outageLife),
			what: fmt.Sprintf("the plugin fails for %v, from %v before client-go's token expires (tokens live %v): client-go runs it on every request "+
				"from the expiry on, one at a time, and fails them until the issuer is back; the vault keeps serving the token it refreshed earlier "+
				"and retries in the background.", o.outage, o.outageLead(), o.outageLife),
		},
	}
	var picked []*scenario
	for name := range strings.SplitSeq(o.scenarios, ",") {
		sc, ok := all[strings.TrimSpace(name)]
		if !ok {
			return nil, fmt.Errorf("--scenarios: no scenario %q (revocation, expiry, outage)", name)
		}
		picked = append(picked, sc)
	}
	return picked, nil
}

// embedded runs the scenarios on an embedded API server.
func embedded(ctx context.Context, o *options) error {
	scenarios, err := o.picked()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	started := time.Now()
	rep := &report{Machine: newMachine(), Workers: o.workers, Latency: o.latency.Seconds()}
	fmt.Println("starting kube-apiserver and etcd, with a token issuer as its webhook authenticator ...")
	cluster, err := testcluster.Start()
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()
	admin, err := kubernetes.NewForConfig(cluster.Admin)
	if err != nil {
		return err
	}
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	e := &env{cluster: cluster, admin: admin, namespace: ns.Name, plugin: self, workers: o.workers, latency: o.latency,
		operator: &operator{admin: admin}, progress: newProgress(os.Stdout)}
	fmt.Println(wrap(fmt.Sprintf("API server %s. Each scenario runs %d workers through a vault and %d through plain client-go, at once, "+
		"with the same exec credential plugin; a request \"waited\" when it spent more than %v getting a credential. "+
		"The figures are this machine's: %s.",
		cluster.Server, o.workers, o.workers, slowCredential, rep.Machine), lineWidth))

	var results []*result
	for _, sc := range scenarios {
		fmt.Printf("\n%s\n", wrap(sc.name+": "+sc.what, lineWidth))
		r, err := e.runScenario(ctx, sc)
		if err != nil {
			return err
		}
		results = append(results, r)
		rep.Scenarios = append(rep.Scenarios, scenarioFigures(r, loadAverage()))
		fmt.Printf("\n%s", table(sc.name, r.sides))
	}
	if slices.ContainsFunc(scenarios, func(sc *scenario) bool { return sc.operator }) {
		op := fmt.Sprintf("The operator (a controller-runtime manager with leader election, through the revocation scenario's vault) "+
			"reconciled %d ConfigMaps; reconcile errors: %d.", e.operator.reconciler.Reconciled.Load(), e.operator.failed.Load())
		if err := e.operator.firstError(); err != nil {
			op += fmt.Sprintf(" The first: %v.", err)
		}
		fmt.Printf("\n%s\n", wrap(op, lineWidth))
		rep.Operator = &operatorReport{Reconciled: e.operator.reconciler.Reconciled.Load(), Errors: e.operator.failed.Load()}
	}
	fmt.Printf("\n%s\n", closing(results))
	for path := range strings.SplitSeq(o.chart, ",") {
		if err := writeChart(path, results); err != nil {
			return err
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		fmt.Println("chart:", path)
	}
	if o.json != "" {
		rep.Seconds = time.Since(started).Round(time.Second).Seconds()
		if err := writeReport(o.json, rep); err != nil {
			return err
		}
		fmt.Println("figures:", o.json)
	}
	return nil
}
