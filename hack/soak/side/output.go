package side

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// The components of a Failure, and of Sample.Successes.
const (
	compHub      = "hub"
	compWatch    = "watch"
	compExec     = "exec"
	compOperator = "operator"
	compAddon    = "addon"
	compFleet    = "fleet"
)

// requestComponents are the components whose successes are caller
// operations (Sample.Requests); the operator's are its reconciles
// (Sample.Reconciled), counted by the operator.
var requestComponents = []string{compHub, compWatch, compExec, compAddon, compFleet}

// recorder writes a side's Records, one JSON object a line, from any
// goroutine, and counts what succeeded.
type recorder struct {
	// run is the side's context: an operation that fails once it has
	// ended was cut short by the end of the run, and is no failure.
	run context.Context

	mu  sync.Mutex // guards enc, so that Records never interleave
	enc *json.Encoder

	// successes by component, every key made by newRecorder: the map is
	// read-only, its counters atomic.
	successes map[string]*atomic.Int64
	failures  atomic.Int64
}

func newRecorder(run context.Context, out io.Writer) *recorder {
	r := &recorder{run: run, enc: json.NewEncoder(out), successes: map[string]*atomic.Int64{}}
	for _, c := range requestComponents {
		r.successes[c] = &atomic.Int64{}
	}
	return r
}

// write writes rec as one line. An error writing is dropped: the harness
// that reads the side's output is gone, and the run is ending.
func (r *recorder) write(rec wire.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(rec)
}

// succeed counts one success of component.
func (r *recorder) succeed(component string) {
	r.successes[component].Add(1)
}

// fail records a Failure of component (and cluster, for the fleet's)
// with err, unless the run has ended. kind overrides the classification
// of err when it is not empty.
func (r *recorder) fail(component, cluster, kind string, err error) {
	if r.run.Err() != nil {
		return
	}
	if kind == "" {
		kind = classify(err)
	}
	r.failures.Add(1)
	r.write(wire.Record{Failure: &wire.Failure{
		At: time.Now(), Component: component, Cluster: cluster, Kind: kind, Message: message(err),
	}})
}

// counts are the successes so far: their sum over requestComponents,
// and each component's.
func (r *recorder) counts() (requests int64, by map[string]int64) {
	by = make(map[string]int64, len(r.successes))
	for c, n := range r.successes {
		by[c] = n.Load()
		requests += by[c]
	}
	return requests, by
}
