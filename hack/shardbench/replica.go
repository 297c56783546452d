package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/authvault/authvault/fleet"
)

// event is one line a replica writes on its standard output: its start
// (start, the first thing its process does), a cluster it took (add) or
// gave up (remove, with why), or its figures (stats). T is the wall clock,
// which every process of the machine shares.
type event struct {
	T       int64  `json:"t"`
	Ev      string `json:"ev"`
	Cluster string `json:"cluster,omitempty"`
	Why     string `json:"why,omitempty"`
	Owned   int    `json:"owned,omitempty"`
	Logins  int    `json:"logins,omitempty"`
	Heap    uint64 `json:"heap,omitempty"`
	Sockets int    `json:"sockets,omitempty"`
}

// replicaFlags configure a replica process.
type replicaFlags struct {
	identity, kubeconfig, leases, secrets, group string
	sharded                                      bool
	connect                                      bool // each owned cluster logs in and asks its version
	verbosity                                    int
	leaseDuration, renewDeadline, retryPeriod    time.Duration
}

// replica runs one fleet over the kubeconfig Secrets of the namespace
// secrets, sharded or not, until SIGTERM; it writes its events to out.
func replica(rf replicaFlags, out io.Writer) error {
	hub, err := clientcmd.BuildConfigFromFlags("", rf.kubeconfig)
	if err != nil {
		return err
	}
	// Each login reads its cluster's Secret from the hub: client-go's
	// default 5 requests a second would take 200 s to log in to a
	// thousand clusters, which a fleet that size sets higher.
	hub.QPS, hub.Burst = 200, 400
	client, err := kubernetes.NewForConfig(hub)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	emit := func(e event) {
		mu.Lock()
		defer mu.Unlock()
		e.T = time.Now().UnixNano()
		_ = enc.Encode(e)
	}
	emit(event{Ev: "start"})
	reg := prometheus.NewRegistry()
	var ctxMu sync.Mutex
	contexts := map[*fleet.Member]context.Context{} // OnAdd's, for OnRemove to say why it ended
	opts := fleet.Options{
		Registerer: reg,
		// Its lines go to the replica's log (bin/shardbench/<id>.log).
		Logger: funcr.New(func(prefix, args string) {
			fmt.Fprintln(os.Stderr, time.Now().Format("15:04:05.000"), prefix, args)
		}, funcr.Options{Verbosity: rf.verbosity}),
		OnAdd: func(ctx context.Context, m *fleet.Member) {
			emit(event{Ev: "add", Cluster: m.Name()})
			ctxMu.Lock()
			contexts[m] = ctx
			ctxMu.Unlock()
			if !rf.connect {
				return
			}
			go func() {
				// A request, as a controller's would: the vault logs in
				// and holds a connection to the cluster.
				cfg, err := m.RESTConfig(ctx)
				if err != nil {
					return
				}
				if c, err := kubernetes.NewForConfig(cfg); err == nil {
					_, _ = c.Discovery().ServerVersion()
				}
			}()
		},
		OnRemove: func(m *fleet.Member) {
			ctxMu.Lock()
			ctx := contexts[m]
			delete(contexts, m)
			ctxMu.Unlock()
			why := ""
			if ctx != nil {
				why = context.Cause(ctx).Error()
			}
			emit(event{Ev: "remove", Cluster: m.Name(), Why: why})
		},
	}
	if rf.sharded {
		opts.Shards = &fleet.Shards{Config: hub, Namespace: rf.leases, Group: rf.group, Identity: rf.identity,
			LeaseDuration: rf.leaseDuration, RenewDeadline: rf.renewDeadline, RetryPeriod: rf.retryPeriod}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	f := fleet.New(opts)
	watched := make(chan error, 1)
	go func() { watched <- f.WatchSecrets(ctx, fleet.SecretsOptions{Client: client, Namespace: rf.secrets}) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			f.Close()
			return <-watched
		case err := <-watched:
			f.Close()
			return fmt.Errorf("the Secrets watch ended: %w", err)
		case <-tick.C:
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			emit(event{Ev: "stats", Owned: owned(f), Logins: logins(reg), Heap: ms.HeapAlloc, Sockets: sockets()})
		}
	}
}

// owned counts the clusters this process owns: those with a vault.
func owned(f *fleet.Fleet) int {
	n := 0
	for _, name := range f.Names() {
		if f.Vault(name) != nil {
			n++
		}
	}
	return n
}

// logins sums the fleet's successful logins.
func logins(reg *prometheus.Registry) int {
	families, err := reg.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, family := range families {
		if family.GetName() != "authvault_logins_total" {
			continue
		}
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == "success" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int(total)
}

// sockets counts this process's open sockets.
func sockets() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && len(target) > 7 && target[:7] == "socket:" {
			n++
		}
	}
	return n
}
