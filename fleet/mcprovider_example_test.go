package fleet_test

import (
	"context"
	"errors"
	"sync"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/vault"
)

// The shapes of multicluster-runtime's pkg/multicluster (ClusterName,
// Aware, ErrClusterNotFound), declared here because that module is not on
// the Go module proxy; with it, use its own and drop these.
type (
	clusterName string
	aware       interface {
		Engage(context.Context, clusterName, cluster.Cluster) error
	}
)

var errClusterNotFound = errors.New("cluster not found")

// fleetProvider is a multicluster-runtime Provider (Get, IndexField) and
// ProviderRunnable (Start) whose clusters are a fleet's: here those of the
// hub's ClusterProfiles. Each cluster is engaged once, with a cluster.Cluster
// built on the fleet's config for it, which stays the same object while
// credentials rotate underneath (a profile's change refreshes the vault and
// keeps the cluster, its cache and its informers); it is disengaged when
// its profile goes.
type fleetProvider struct {
	opts fleet.ProfilesOptions

	mu       sync.Mutex
	aware    aware
	clusters map[clusterName]cluster.Cluster
	indexes  []fieldIndex
}

type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// Start runs the fleet's watch until ctx ends, engaging each cluster as it
// joins.
func (p *fleetProvider) Start(ctx context.Context, a aware) error {
	p.mu.Lock()
	p.aware, p.clusters = a, map[clusterName]cluster.Cluster{}
	p.mu.Unlock()
	f := fleet.New(fleet.Options{
		Logger: logr.FromContextOrDiscard(ctx), // a fleet's default logger discards
		OnAdd:  func(ctx context.Context, m *fleet.Member) { go p.run(ctx, m) },
	})
	defer f.Close()
	return f.WatchClusterProfiles(ctx, p.opts)
}

// run is one cluster's life in the provider: ctx ends when it leaves the
// fleet.
func (p *fleetProvider) run(ctx context.Context, m *fleet.Member) {
	log := logr.FromContextOrDiscard(ctx)
	cfg, err := m.RESTConfig(ctx) // the first login; the same object from then on
	if err != nil {
		return // it left, or the fleet closed, before its first login
	}
	cl, err := cluster.New(cfg)
	if err != nil {
		log.Error(err, "no cluster.Cluster")
		return
	}
	name := clusterName(m.Name())
	p.mu.Lock()
	for _, ix := range p.indexes {
		if err := cl.GetFieldIndexer().IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			log.Error(err, "index", "field", ix.field)
		}
	}
	p.clusters[name] = cl
	a := p.aware
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.clusters, name)
		p.mu.Unlock()
	}()
	go func() {
		if err := cl.Start(ctx); err != nil {
			log.Error(err, "cluster.Cluster stopped")
		}
	}()
	if !cl.GetCache().WaitForCacheSync(ctx) {
		return
	}
	if err := a.Engage(ctx, name, cl); err != nil {
		log.Error(err, "engage")
		return
	}
	<-ctx.Done()
}

// Get returns the cluster of that name, while it is in the fleet.
func (p *fleetProvider) Get(_ context.Context, name clusterName) (cluster.Cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cl, ok := p.clusters[name]; ok {
		return cl, nil
	}
	return nil, errClusterNotFound
}

// IndexField indexes the field on every cluster, present and to come.
func (p *fleetProvider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.indexes = append(p.indexes, fieldIndex{obj, field, extract})
	for _, cl := range p.clusters {
		if err := cl.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
			return err
		}
	}
	return nil
}

// A multicluster-runtime provider backed by a fleet is the file above:
// fleetProvider. (Not run: it needs a hub and multicluster-runtime's
// manager, which would call Start.)
func Example_multiclusterRuntimeProvider() {
	hubConfig, err := vault.Default.RESTConfig(context.Background()) // the hub's own credentials
	if err != nil {
		panic(err)
	}
	providers, err := fleet.ReadProviderFile("/etc/fleet/providers.json")
	if err != nil {
		panic(err)
	}
	p := &fleetProvider{opts: fleet.ProfilesOptions{Config: hubConfig, Providers: providers}}
	var _ interface {
		Get(context.Context, clusterName) (cluster.Cluster, error)
		IndexField(context.Context, client.Object, string, client.IndexerFunc) error
		Start(context.Context, aware) error
	} = p
}
