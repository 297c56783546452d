package side

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/authvault/authvault/hack/soak/wire"
)

// loginsMetric is the vault's counter of login attempts, by handler and
// result, with a cluster label on a fleet's vaults.
const loginsMetric = "authvault_logins_total"

// sampler takes the side's Samples.
type sampler struct {
	rec        *recorder
	clusters   func() int      // fleet clusters reachable now
	owned      func() []string // clusters a sharded fleet owns now; nil: not sharded
	reconciled func() int64    // the operator's reconciles

	// logins are counted through the series that come and go: a fleet's
	// cluster that leaves takes its series with it, and one that comes
	// back starts again from zero. Touched by take alone.
	logins *counterSum
}

// take is the process as it is now.
func (s *sampler) take() wire.Sample {
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	requests, by := s.rec.counts()
	series, logins := s.gather()
	var owned []string
	if s.owned != nil {
		owned = s.owned()
	}
	return wire.Sample{
		Owned:      owned,
		At:         time.Now(),
		HeapInUse:  mem.HeapInuse,
		Goroutines: runtime.NumGoroutine(),
		FDs:        countFDs(),
		Conns:      countConns(),
		Series:     series,
		LogLines:   logs.lines.Load(),
		Logins:     logins,
		Requests:   requests,
		Successes:  by,
		Clusters:   s.clusters(),
		Reconciled: s.reconciled(),
	}
}

// gather counts the series of controller-runtime's registry, and the
// logins so far (0 unless the sampler counts them).
func (s *sampler) gather() (series int, logins int64) {
	families, _ := metrics.Registry.Gather() // a partial gather still counts
	for _, mf := range families {
		series += len(mf.GetMetric())
		if s.logins != nil && mf.GetName() == loginsMetric {
			s.logins.observe(mf.GetMetric())
		}
	}
	if s.logins != nil {
		logins = int64(s.logins.total())
	}
	return series, logins
}

// counterSum is the sum of a counter's series since it was made, over
// series that disappear and reset.
type counterSum struct {
	last    map[string]float64 // each series' value at the last observe, by its labels
	retired float64            // what series that went or reset had counted
}

func (c *counterSum) observe(ms []*dto.Metric) {
	now := make(map[string]float64, len(ms))
	for _, m := range ms {
		var key strings.Builder
		for _, l := range m.GetLabel() {
			key.WriteString(l.GetName() + "=" + l.GetValue() + ",")
		}
		now[key.String()] = m.GetCounter().GetValue()
	}
	for k, v := range c.last {
		if n, ok := now[k]; !ok || n < v {
			c.retired += v
		}
	}
	c.last = now
}

func (c *counterSum) total() float64 {
	sum := c.retired
	for _, v := range c.last {
		sum += v
	}
	return sum
}

// countFDs is how many file descriptors the process has open.
func countFDs() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries)
}

// countConns is how many established TCP connections the process has:
// the network namespace's (/proc/self/net/tcp and tcp6) whose socket
// inode is one of the process's descriptors, since the namespace holds
// the harness's and the other side's connections too.
func countConns() int {
	inodes := map[string]bool{}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); ok && err == nil {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	n := 0
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		n += establishedIn(table, inodes)
	}
	return n
}

// tcpEstablished is the state column's value for ESTABLISHED.
const tcpEstablished = "01"

// establishedIn counts the established connections of table whose inode
// is in inodes.
func establishedIn(table string, inodes map[string]bool) int {
	f, err := os.Open(table)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[3] == tcpEstablished && inodes[fields[9]] {
			n++
		}
	}
	return n
}
