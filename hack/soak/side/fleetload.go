package side

import (
	"context"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The fleet's pace: one read of each cluster every readEvery, spread over
// that time, checked every fleetTick.
const (
	readEvery = 5 * time.Second
	fleetTick = 100 * time.Millisecond
)

// fleetLoad reads each cluster the side has, and counts the clusters the
// side reaches.
type fleetLoad struct {
	rec   *recorder
	fleet fleetView

	mu       sync.Mutex // guards clusters
	clusters map[string]*clusterState
}

// clusterState is one cluster the side has had.
type clusterState struct {
	due       time.Time // of the next read
	reading   bool      // a read is on its way: the next waits for it
	reachable bool      // the last read succeeded
	present   bool      // the side has it now
}

func newFleetLoad(rec *recorder, fleet fleetView) *fleetLoad {
	return &fleetLoad{rec: rec, fleet: fleet, clusters: map[string]*clusterState{}}
}

// run reads until ctx ends, and returns once the reads have.
func (l *fleetLoad) run(ctx context.Context) {
	var reads sync.WaitGroup
	defer reads.Wait()
	t := time.NewTicker(fleetTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		for _, name := range l.due(now) {
			reads.Go(func() { l.read(ctx, name) })
		}
	}
}

// due are the clusters to read now; it marks them reading, and records a
// failure for each cluster due that the side had and has no more.
func (l *fleetLoad) due(now time.Time) []string {
	names := l.fleet.names()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.clusters {
		s.present = false
	}
	for _, name := range names {
		s, ok := l.clusters[name]
		if !ok {
			// Spread over readEvery, so that a fleet's reads come evenly.
			s = &clusterState{due: now.Add(jitter(readEvery))}
			l.clusters[name] = s
		}
		s.present = true
	}
	var read []string
	for name, s := range l.clusters {
		if s.reading || now.Before(s.due) {
			continue
		}
		s.due = now.Add(readEvery)
		if !s.present && l.fleet.moved(name) {
			delete(l.clusters, name) // another replica reads it now
			continue
		}
		if !s.present {
			s.reachable = false
			l.rec.fail(compFleet, name, "", errNoCluster)
			continue
		}
		s.reading = true
		read = append(read, name)
	}
	slices.Sort(read)
	return read
}

// read makes one authenticated read of the cluster.
func (l *fleetLoad) read(ctx context.Context, name string) {
	rctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	cs, err := l.fleet.client(rctx, name)
	if err == nil {
		_, err = cs.CoreV1().Namespaces().Get(rctx, "default", metav1.GetOptions{})
	}
	moved := err != nil && l.fleet.moved(name)
	if err != nil && !moved && !slices.Contains(l.fleet.names(), name) {
		err = errNoCluster // it left while it was read
	}
	l.mu.Lock()
	s := l.clusters[name]
	s.reading, s.reachable = false, err == nil
	l.mu.Unlock()
	if moved {
		return // another replica took it while it was read: its read, not ours
	}
	if err != nil {
		l.rec.fail(compFleet, name, "", err)
		return
	}
	l.rec.succeed(compFleet)
}

// reachable is how many clusters the side has whose last read succeeded.
func (l *fleetLoad) reachable() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.clusters {
		if s.present && s.reachable {
			n++
		}
	}
	return n
}
