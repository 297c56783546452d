package integration

import (
	"net/http/httptest"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/authvault/authvault/testkit/testwait"
)

var _ = Describe("addon-proxy's log of refused callers", func() {
	It("says each refusal at -v=1 with its reason, never the token, and a burst as one INFO line without -v", func(ctx SpecContext) {
		ns := newNamespace("refusals")
		newServiceAccount(ctx, ns, "client")
		up := httptest.NewServer(&greeter{})
		DeferCleanup(up.Close)
		other := saToken(ctx, ns, "client", "another.svc") // a real token, for another audience

		for _, tc := range []struct {
			args []string
			each bool // each refusal has its line
		}{{[]string{"-v=1"}, true}, {nil, false}} {
			By("addon-proxy " + strings.Join(tc.args, " "))
			proxy, _, logs := startAddonProxyLogged(ctx, append([]string{"--upstream", up.URL, "--audience", addonAudience}, tc.args...)...)
			for range 5 {
				code, body, _ := get(proxy+"/hello", other, nil)
				Expect(code).To(Equal(401), body)
			}
			Eventually(logs).WithTimeout(testwait.Hang).WithPolling(50 * time.Millisecond).Should(ContainSubstring("callers refused ("))
			if tc.each {
				Eventually(func() int { return strings.Count(logs(), `"msg":"caller refused"`) }).
					WithTimeout(testwait.Hang).WithPolling(50 * time.Millisecond).Should(Equal(5))
				Expect(logs()).To(ContainSubstring("not meant for this service"), "the reason")
			} else {
				// The first refusal's V(1) line would come before the INFO line.
				Expect(logs()).NotTo(ContainSubstring(`"msg":"caller refused"`))
			}
			got := logs()
			Expect(strings.Count(got, "callers refused (")).To(Equal(1), "five refusals within a minute are one INFO line:\n%s", got)
			Expect(got).NotTo(ContainSubstring(other[len(other)-20:]), "the token in the log")
		}
	}, NodeTimeout(2*time.Minute))
})
