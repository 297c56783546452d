package report

import (
	"strings"
	"testing"
	"time"

	"github.com/authvault/authvault/hack/soak/wire"
)

// A failure's message is the caller's error as it got it. A side should
// never write a secret in one (the harness reports it as Leaked if it
// does); the report, which copies messages into the docs and into its
// errors, hides URL user info all the same.
func TestMessagesHideURLUserInfo(t *testing.T) {
	const secret = "s3cr3t-t0ken"
	r := flatRun(2*time.Minute, nil)
	r.Sides[wire.RoleAuthvault].Failures = []wire.Failure{{
		At: t0.Add(time.Minute), Component: "fleet", Cluster: "c1", Kind: "refused",
		Message: `Get "https://admin:` + secret + `@10.0.0.1:6443/api": connection refused`,
	}}
	s := Summarize(r)
	outputs := map[string]string{"Markdown": s.Markdown(), "Check": errorText(s.Check(Bounds{}))}
	for name, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("%s prints the URL's password:\n%s", name, out)
		}
		if !strings.Contains(out, "10.0.0.1:6443/api") {
			t.Errorf("%s does not show the failure's URL:\n%s", name, out)
		}
	}
}
