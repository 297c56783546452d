package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/testkit/testwait"
)

// The README's operator main (examples/quickstart), run as written: its
// handler of its own beside the fallback, its lease in the credential's
// namespace, its logs through controller-runtime's logger, and a clean
// stop on SIGTERM. Before, the README's main failed outside a cluster
// without LeaderElectionNamespace, lost every log line to controller-
// runtime's "SetLogger was never called", and closed the vault under the
// manager's last event ("Unable to write event … the vault is closed").
var _ = Describe("The README's operator main", func() {
	quickstart := func(ctx SpecContext, env []string, namespace, servingHandler string) {
		probe := freeAddress()
		cmd := exec.Command(buildExample("quickstart"), "--metrics-bind-address", "0", "--health-probe-bind-address", probe)
		cmd.Env = append(os.Environ(), env...)
		out := gbytes.NewBuffer()
		cmd.Stdout, cmd.Stderr = io.MultiWriter(out, GinkgoWriter), io.MultiWriter(out, GinkgoWriter)
		Expect(cmd.Start()).To(Succeed())
		defer func() { _ = cmd.Process.Kill() }()

		Eventually(func() (string, error) { return readyz(probe) }).WithTimeout(testwait.Hang).Should(Equal("200 ok"))
		Eventually(func() error {
			_, err := admin.CoordinationV1().Leases(namespace).Get(ctx, "my-operator", metav1.GetOptions{})
			return err
		}).WithTimeout(testwait.Hang).Should(Succeed(), "the lease in the credential's namespace %s", namespace)
		Eventually(out).WithTimeout(testwait.Hang).Should(gbytes.Say("(?i)successfully acquired lease"))

		Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		Eventually(exited).WithTimeout(testwait.Hang).Should(Receive(BeNil()), "exit status 0 after SIGTERM")

		logs := string(out.Contents())
		for _, bad := range []string{"SetLogger was never called", "the vault is closed", "Unable to write event", "panic"} {
			Expect(logs).NotTo(ContainSubstring(bad))
		}
		// No error from the vault. (controller-runtime logs "leader election
		// lost" at error level as it releases the lease on purpose: its own.)
		Expect(logs).NotTo(MatchRegexp(`"level":"error"[^\n]*"logger":"authvault"`))
		Expect(logs).To(MatchRegexp(`authvault.*`+regexp.QuoteMeta(servingHandler)), "the log names the handler that serves")
		// The leader election's last event went through the vault.
		Eventually(func() ([]string, error) {
			list, err := admin.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
			var reasons []string
			for _, e := range list.Items {
				if e.InvolvedObject.Name == "my-operator" {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons, err
		}).WithTimeout(testwait.Hang).Should(ContainElement("LeaderElection"))
	}

	It("serves its own login's credential when the store has one", func(ctx SpecContext) {
		store := filepath.Join(GinkgoT().TempDir(), "store.json")
		entry, _ := json.Marshal(map[string]string{"server": cluster.Server, "caData": string(cluster.CAData), "token": cluster.Issuer.Issue(0)})
		Expect(os.WriteFile(store, entry, 0o600)).To(Succeed())
		// A kubeconfig of another namespace beside it: the fallback logs in
		// too, but the registered handler's credential serves.
		kubeconfig := writeKubeconfig(fmt.Sprintf("{token: %q}", cluster.Issuer.Issue(0)))
		quickstart(ctx, []string{"SECRET_STORE=" + store, "KUBECONFIG=" + kubeconfig, "HOME=" + filepath.Dir(kubeconfig)}, "default", "secret-store")
	}, NodeTimeout(2*time.Minute))

	// A first login that fails (the kubeconfig is not there yet) leaves the
	// operator up and unready, its readiness check naming the file; once
	// the file is there the vault logs in again by itself and the operator
	// becomes ready and takes its lease, without a restart. Before, it
	// exited 1 in the second it started.
	It("stays up, unready, through a first login that fails, and becomes ready once it can log in", func(ctx SpecContext) {
		kubeconfig := writeKubeconfig(fmt.Sprintf("{token: %q}", cluster.Issuer.Issue(0)))
		later := kubeconfig + ".later"
		Expect(os.Rename(kubeconfig, later)).To(Succeed())
		probe := freeAddress()
		cmd := exec.Command(buildExample("quickstart"), "--metrics-bind-address", "0", "--health-probe-bind-address", probe)
		cmd.Env = append(os.Environ(), "SECRET_STORE=", "KUBECONFIG="+kubeconfig, "HOME="+filepath.Dir(kubeconfig))
		out := gbytes.NewBuffer()
		cmd.Stdout, cmd.Stderr = io.MultiWriter(out, GinkgoWriter), io.MultiWriter(out, GinkgoWriter)
		Expect(cmd.Start()).To(Succeed())
		defer func() { _ = cmd.Process.Kill() }()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()

		Eventually(func() (string, error) { return readyz(probe) }).WithTimeout(testwait.Hang).
			Should(And(HavePrefix("500 "), ContainSubstring("no file of $KUBECONFIG ("+kubeconfig+")")), "unready, and says which file is missing")
		Consistently(exited).WithTimeout(2*time.Second).ShouldNot(Receive(), "still running after its first login failed")

		Expect(os.Rename(later, kubeconfig)).To(Succeed())
		Eventually(func() (string, error) { return readyz(probe) }).WithTimeout(testwait.Hang).Should(Equal("200 ok"), "ready once the kubeconfig is there, without a restart")
		Eventually(out).WithTimeout(testwait.Hang).Should(gbytes.Say("(?i)successfully acquired lease"), "the lease, taken through the vault's late credential")
		Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		Eventually(exited).WithTimeout(testwait.Hang).Should(Receive(BeNil()), "exit status 0 after SIGTERM")
		Expect(string(out.Contents())).NotTo(ContainSubstring("operator stopped"))
	}, NodeTimeout(3*time.Minute))

	It("falls back on the kubeconfig, and takes its namespace for the lease", func(ctx SpecContext) {
		ns := newNamespace("quickstart")
		kubeconfig := writeKubeconfigIn(ns, fmt.Sprintf("{token: %q}", cluster.Issuer.Issue(0)))
		dir := filepath.Dir(kubeconfig)
		quickstart(ctx, []string{"SECRET_STORE=", "KUBECONFIG=" + kubeconfig, "HOME=" + dir}, ns, "kubeconfig from --kubeconfig or $KUBECONFIG")
	}, NodeTimeout(2*time.Minute))
})
