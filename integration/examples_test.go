package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/authvault/authvault/examples/operator/annotator"
	"github.com/authvault/authvault/testkit/testwait"
)

// buildExample builds ./examples/name and returns the binary.
func buildExample(name string) string {
	bin := filepath.Join(GinkgoT().TempDir(), filepath.Base(name))
	build := exec.Command("go", "build", "-o", bin, "../examples/"+name)
	build.Stderr = GinkgoWriter
	Expect(build.Run()).To(Succeed(), "building examples/%s", name)
	return bin
}

var _ = Describe("The examples", func() {
	It("operator annotates ConfigMaps, logging in through the vault's fallback (--kubeconfig)", func(ctx SpecContext) {
		ns := newNamespace("example-operator")
		for i := range 3 {
			_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		kubeconfig := writeKubeconfig(fmt.Sprintf("{token: %q}", cluster.Issuer.Issue(0)))
		dir := filepath.Dir(kubeconfig)
		probe := freeAddress()
		cmd := exec.CommandContext(ctx, buildExample("operator"), "--kubeconfig", kubeconfig, "--namespace", ns, "--run-for", "15s",
			"--health-probe-bind-address", probe)
		cmd.Env = append(os.Environ(), "KUBECONFIG=", "HOME="+dir) // nothing but the flag to fall back on
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, GinkgoWriter
		Expect(cmd.Start()).To(Succeed())
		// The vault's readiness check, through the manager's /readyz.
		Eventually(func() (string, error) { return readyz(probe) }).WithTimeout(testwait.Hang).Should(Equal("200 ok"))
		Expect(cmd.Wait()).To(Succeed())
		Expect(out.String()).To(ContainSubstring("failed 0"))
		list, err := admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		annotated := 0
		for _, cm := range list.Items {
			if cm.Annotations[annotator.Annotation] != "" {
				annotated++
			}
		}
		Expect(annotated).To(BeNumerically(">=", 3), "the operator annotated the ConfigMaps")
	}, NodeTimeout(2*time.Minute))

	It("custom-login lists namespaces with a handler reading a secret store", func(ctx SpecContext) {
		store := filepath.Join(GinkgoT().TempDir(), "store.json")
		entry, _ := json.Marshal(map[string]string{"server": cluster.Server, "caData": string(cluster.CAData), "token": cluster.Issuer.Issue(0)})
		Expect(os.WriteFile(store, entry, 0o600)).To(Succeed())
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, buildExample("custom-login"), "--store", store, "--run-for", "3s")
		cmd.Stdout, cmd.Stderr = &out, GinkgoWriter
		Expect(cmd.Run()).To(Succeed())
		Expect(out.String()).To(MatchRegexp(`namespaces: \d+`))
	}, NodeTimeout(2*time.Minute))

	It("custom-login gives up after its three retries with a clear error", func(ctx SpecContext) {
		missing := filepath.Join(GinkgoT().TempDir(), "absent.json")
		var stderr bytes.Buffer
		cmd := exec.CommandContext(context.Background(), buildExample("custom-login"), "--store", missing, "--run-for", "20s")
		cmd.Stderr = &stderr
		Expect(cmd.Run()).NotTo(Succeed())
		Expect(stderr.String()).To(ContainSubstring("not there yet"))
		Expect(stderr.String()).To(ContainSubstring(`"attempt"=3`), "the third retry was the last")
	}, NodeTimeout(time.Minute))
})

// freeAddress is a loopback address with a port nothing listens on.
func freeAddress() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}
