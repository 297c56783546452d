package shard

import (
	"fmt"
	"slices"
	"testing"
)

// A batch's log line names its clusters, the first ten in order, and counts
// the others: the line at the default level that says who owns a cluster.
func TestShardLogLinesNameTheClustersOfABatch(t *testing.T) {
	members := func(names ...string) []Moved {
		var ms []Moved
		for _, n := range names {
			ms = append(ms, Moved{Name: n})
		}
		return ms
	}
	if got := fmt.Sprint(namedIn(members("ns/b", "ns/a"))); got != "[names [ns/a ns/b]]" {
		t.Errorf("two clusters: %s", got)
	}
	many := seatNames(12)
	slices.Reverse(many)
	got := fmt.Sprint(namedIn(members(many...)))
	if want := fmt.Sprint([]any{"names", seatNames(10), "more", 2}); got != want {
		t.Errorf("twelve clusters: %s, want %s", got, want)
	}
}

func seatNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ns/c%02d", i)
	}
	return names
}
