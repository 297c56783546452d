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
// runtime's "SetLogger was never called", closed the vault under the
// manager's last event ("Unable to write event … the vault is closed"),
// and ended every clean stop with controller-runtime's error line and
// stack, "leader election lost", as it handed its lease on.
var _ = Describe("The README's operator main", func() {
	type process struct {
		cmd    *exec.Cmd
		out    *gbytes.Buffer
		exited chan error
		probe  string
	}
	start := func(env []string, args ...string) process {
		p := process{out: gbytes.NewBuffer(), exited: make(chan error, 1), probe: freeAddress()}
		p.cmd = exec.Command(buildExample("quickstart"), append([]string{"--metrics-bind-address", "0", "--health-probe-bind-address", p.probe}, args...)...)
		p.cmd.Env = append(os.Environ(), env...)
		p.cmd.Stdout, p.cmd.Stderr = io.MultiWriter(p.out, GinkgoWriter), io.MultiWriter(p.out, GinkgoWriter)
		Expect(p.cmd.Start()).To(Succeed())
		DeferCleanup(func() { _ = p.cmd.Process.Kill() })
		go func() { p.exited <- p.cmd.Wait() }()
		return p
	}
	holder := func(ctx SpecContext, namespace string) (string, error) {
		lease, err := admin.CoordinationV1().Leases(namespace).Get(ctx, "my-operator", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return "", err
		}
		return *lease.Spec.HolderIdentity, nil
	}
	quickstart := func(ctx SpecContext, env []string, namespace, servingHandler string) {
		p := start(env)
		Eventually(func() (string, error) { return readyz(p.probe) }).WithTimeout(testwait.Hang).Should(Equal("200 ok"))
		Eventually(func() (string, error) { return holder(ctx, namespace) }).WithTimeout(testwait.Hang).
			ShouldNot(BeEmpty(), "the lease in the credential's namespace %s", namespace)
		Eventually(p.out).WithTimeout(testwait.Hang).Should(gbytes.Say("(?i)successfully acquired lease"))

		Expect(p.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		Eventually(p.exited).WithTimeout(testwait.Hang).Should(Receive(BeNil()), "exit status 0 after SIGTERM")

		logs := string(p.out.Contents())
		for _, bad := range []string{"SetLogger was never called", "the vault is closed", "Unable to write event", "panic", "leader election lost"} {
			Expect(logs).NotTo(ContainSubstring(bad))
		}
		Expect(logs).NotTo(ContainSubstring(`"level":"error"`), "no error line, the vault's or the manager's, at a clean stop")
		Expect(logs).To(MatchRegexp(`authvault.*`+regexp.QuoteMeta(servingHandler)), "the log names the handler that serves")
		// Handed on through the vault after the manager stopped: the next
		// replica need not wait out the lease's 15 s.
		Expect(holder(ctx, namespace)).To(BeEmpty(), "the lease released at the stop")
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
	// exited 1 in the second it started. The kubeconfig is named by
	// $KUBECONFIG or by --kubeconfig, as the issue's new user did.
	staysUp := func(viaFlag bool) {
		kubeconfig := writeKubeconfig(fmt.Sprintf("{token: %q}", cluster.Issuer.Issue(0)))
		later := kubeconfig + ".later"
		Expect(os.Rename(kubeconfig, later)).To(Succeed())
		env := []string{"SECRET_STORE=", "HOME=" + filepath.Dir(kubeconfig)}
		var args []string
		says := "no file of $KUBECONFIG (" + kubeconfig + ")"
		if viaFlag {
			env, args, says = append(env, "KUBECONFIG="), []string{"--kubeconfig", kubeconfig}, kubeconfig
		} else {
			env = append(env, "KUBECONFIG="+kubeconfig)
		}
		p := start(env, args...)
		Eventually(func() (string, error) { return readyz(p.probe) }).WithTimeout(testwait.Hang).
			Should(And(HavePrefix("500 "), ContainSubstring(says)), "unready, and says which file is missing")
		Consistently(p.exited).WithTimeout(2*time.Second).ShouldNot(Receive(), "still running after its first login failed")

		Expect(os.Rename(later, kubeconfig)).To(Succeed())
		Eventually(func() (string, error) { return readyz(p.probe) }).WithTimeout(testwait.Hang).Should(Equal("200 ok"), "ready once the kubeconfig is there, without a restart")
		Eventually(p.out).WithTimeout(testwait.Hang).Should(gbytes.Say("(?i)successfully acquired lease"), "the lease, taken through the vault's late credential")
		Expect(p.cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
		Eventually(p.exited).WithTimeout(testwait.Hang).Should(Receive(BeNil()), "exit status 0 after SIGTERM")
		Expect(string(p.out.Contents())).NotTo(ContainSubstring("operator stopped"))
	}
	It("stays up, unready, through a first login that fails, and becomes ready once it can log in", func(ctx SpecContext) {
		staysUp(false)
	}, NodeTimeout(3*time.Minute))
	It("stays up, unready, with a --kubeconfig that is not there yet, and becomes ready once it is", func(ctx SpecContext) {
		staysUp(true)
	}, NodeTimeout(3*time.Minute))

	It("falls back on the kubeconfig, and takes its namespace for the lease", func(ctx SpecContext) {
		ns := newNamespace("quickstart")
		kubeconfig := writeKubeconfigIn(ns, fmt.Sprintf("{token: %q}", cluster.Issuer.Issue(0)))
		dir := filepath.Dir(kubeconfig)
		quickstart(ctx, []string{"SECRET_STORE=", "KUBECONFIG=" + kubeconfig, "HOME=" + dir}, ns, "kubeconfig from --kubeconfig or $KUBECONFIG")
	}, NodeTimeout(2*time.Minute))

	// The case the clean stop must not hide: a lease another replica takes
	// (its renewals fail for the 10 s of RenewDeadline) stops the operator
	// with an error, and it does not release what it no longer holds.
	It("stops with an error when another replica takes its lease", func(ctx SpecContext) {
		ns := newNamespace("quickstart")
		kubeconfig := writeKubeconfigIn(ns, fmt.Sprintf("{token: %q}", cluster.Issuer.Issue(0)))
		p := start([]string{"SECRET_STORE=", "KUBECONFIG=" + kubeconfig, "HOME=" + filepath.Dir(kubeconfig)})
		Eventually(p.out).WithTimeout(testwait.Hang).Should(gbytes.Say("(?i)successfully acquired lease"))

		Eventually(func() error {
			lease, err := admin.CoordinationV1().Leases(ns).Get(ctx, "my-operator", metav1.GetOptions{})
			if err != nil {
				return err
			}
			other, now := "another-replica", metav1.NewMicroTime(time.Now())
			lease.Spec.HolderIdentity, lease.Spec.RenewTime, lease.Spec.AcquireTime = &other, &now, &now
			_, err = admin.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{})
			return err
		}).WithTimeout(testwait.Hang).Should(Succeed())

		Eventually(p.exited).WithTimeout(testwait.Hang).Should(Receive(HaveOccurred()), "exit status 1 once the lease is another's")
		Expect(string(p.out.Contents())).To(MatchRegexp(`"operator stopped","error":"leader election lost: lease ` + ns + `/my-operator not renewed`))
		Expect(holder(ctx, ns)).To(Equal("another-replica"), "not released: it was not its own")
	}, NodeTimeout(2*time.Minute))
})
