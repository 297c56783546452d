package integration

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/authvault/authvault/testkit/rotation"
)

// The headline figure: the same workload, the same plugin and the same
// revocations, through a vault and through client-go's exec support.
var _ = Describe("Compared with client-go", Label("comparison", "long"), func() {
	It("shows callers no 401 where client-go shows them", func(ctx SpecContext) {
		ns := newNamespace("compare")
		sides, err := rotation.Compare(ctx, rotation.CompareOptions{
			Cluster: cluster, Namespace: ns, Plugin: plugin,
			Workers: 8, Duration: 30 * time.Second, RevokeAfter: 5 * time.Second,
		})
		Expect(err).NotTo(HaveOccurred())
		report("comparison, 8 workers, 30 s each, tokens revoked 5 s after issue:\n%s", rotation.Table(sides))
		vaultSide, clientGo := sides[0], sides[1]
		Expect(vaultSide.Stats.FirstError).NotTo(HaveOccurred())
		Expect(vaultSide.Stats.Unauthorized).To(BeZero())
		Expect(clientGo.Stats.Unauthorized).To(BeNumerically(">", 0), "client-go returns the 401 that triggers its refresh")
		Expect(vaultSide.Runs).To(BeNumerically(">=", 2), "the vault's plugin ran again after revocations")
	}, NodeTimeout(3*time.Minute))
})
