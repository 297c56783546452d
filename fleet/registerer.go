package fleet

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// registerer is a cluster's view of the fleet's Registerer: it labels the
// cluster's metrics, and drops them the moment the cluster leaves the
// fleet. Its vault closes later, in the background or after OnRemove, and
// unregisters them only then; by that time a cluster of the same name may
// have registered its own, which the old vault's late Unregister would
// remove (a registry matches collectors by their descriptors, not by
// identity), and whose Register the old metrics would have refused.
type registerer struct {
	reg prometheus.Registerer // the fleet's, with the cluster label

	mu         sync.Mutex // guards collectors and dropped
	collectors []prometheus.Collector
	dropped    bool
}

func (r *registerer) Register(c prometheus.Collector) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped {
		return nil
	}
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *registerer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *registerer) Unregister(c prometheus.Collector) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.Index(r.collectors, c)
	if i < 0 {
		return false
	}
	r.collectors = slices.Delete(r.collectors, i, i+1)
	return r.reg.Unregister(c)
}

// drop unregisters every collector, and makes later calls no-ops.
func (r *registerer) drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropped = true
	for _, c := range r.collectors {
		r.reg.Unregister(c)
	}
	r.collectors = nil
}
