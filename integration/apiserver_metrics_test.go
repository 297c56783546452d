package integration

import (
	"bytes"
	"context"

	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// apiserverAuthFailures is how many requests the API server has failed to
// authenticate since it started: its authentication_attempts counter, every
// result but success. The API server answers each of them 401 (its
// authentication filter counts the attempt and sends the 401 in one place),
// and counts no 401 elsewhere, so a difference of two readings is the
// number of 401s it sent in between, whatever the credential: a token the
// webhook refused, one refused from its cache without a review, a client
// certificate of a CA it does not trust. The reading itself goes as
// cluster.Admin, which authenticates.
func apiserverAuthFailures(ctx context.Context) int {
	const name = "authentication_attempts"
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	// The page is 1.5 MB; only the family's lines are parsed, which takes
	// a millisecond instead of half a second under -race.
	var lines []byte
	for line := range bytes.Lines(raw) {
		if bytes.HasPrefix(line, []byte(name+"{")) || bytes.HasPrefix(line, []byte("# TYPE "+name+" ")) {
			lines = append(lines, line...)
		}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(lines))
	Expect(err).NotTo(HaveOccurred())
	family, ok := families[name]
	Expect(ok).To(BeTrue(), "the API server's /metrics has authentication_attempts")
	failures := 0.0
	for _, m := range family.GetMetric() {
		if labelOf(m, "result") != "success" {
			failures += m.GetCounter().GetValue()
		}
	}
	return int(failures)
}
