package flux_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// The series sum reads: requests answered (a watch once it has ended),
// and watch-list requests (a list sent as a watch's initial events) once
// their list is sent.
const (
	requestTotal   = "apiserver_request_total"
	watchListTotal = "apiserver_watch_list_duration_seconds_count"
)

// sum adds up an API server's series of metric whose labels match, read
// from its /metrics: what arrived there, whoever sent it.
func sum(ctx context.Context, cs kubernetes.Interface, metric string, match func(labels map[string]string) bool) (float64, error) {
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading /metrics: %w", err)
	}
	var total float64
	for line := range strings.Lines(string(body)) {
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || !match(parseLabels(labels)) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("reading /metrics: %q: %w", line, err)
		}
		total += v
	}
	return total, nil
}

// parseLabels reads `a="x",b="y"`; the API server's label values hold no
// quote.
func parseLabels(s string) map[string]string {
	labels := map[string]string{}
	for s != "" {
		key, rest, ok := strings.Cut(s, `="`)
		if !ok {
			break
		}
		value, rest, _ := strings.Cut(rest, `"`)
		labels[key] = value
		s = strings.TrimPrefix(rest, ",")
	}
	return labels
}
