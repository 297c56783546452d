// Package integration runs authvault against a real kube-apiserver and etcd
// (envtest, binaries from hack/envtest.sh) whose tokens come from a webhook
// token authenticator the tests control.
//
// The specs labelled "long" (minutes of load through rotations: the
// rotation under load, the comparison with client-go, the fleet) run in a
// process of their own in make test, beside one that runs the others
// (AUTHVAULT_LABEL_FILTER, read by testcluster.RunSuite): each starts its own API server, and the
// suite's time is the longer half's rather than the sum. A spec that takes
// most of a minute or waits on a fixed duration belongs under that label.
package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testplugin"
)

var (
	cluster *testcluster.Cluster
	admin   kubernetes.Interface
	// plugin is the handlers package's test credential plugin.
	plugin string
)

func TestIntegration(t *testing.T) {
	testcluster.RunSuite(t, "authvault against a real kube-apiserver")
}

var _ = BeforeSuite(func() {
	var cleanup func()
	var err error
	plugin, cleanup, err = testplugin.Build()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cleanup)

	cluster, err = testcluster.Start()
	Expect(err).NotTo(HaveOccurred())
	admin, err = kubernetes.NewForConfig(cluster.Admin)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if cluster != nil {
		Expect(cluster.Stop()).To(Succeed())
	}
})

// newNamespace creates a namespace for one spec.
func newNamespace(prefix string) string {
	ns, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return ns.Name
}

// report writes a figure where the suite's output shows it.
func report(format string, args ...any) {
	AddReportEntry("figure", fmt.Sprintf(format, args...))
	fmt.Fprintf(GinkgoWriter, format+"\n", args...)
}

// writeKubeconfig writes a kubeconfig for the cluster (its CA in a file
// beside it) whose one user is user, a YAML mapping, and returns its path.
func writeKubeconfig(user string) string { return writeKubeconfigIn("default", user) }

// writeKubeconfigIn is writeKubeconfig with namespace as its context's.
func writeKubeconfigIn(namespace, user string) string {
	dir := GinkgoT().TempDir()
	Expect(os.WriteFile(filepath.Join(dir, "ca.crt"), cluster.CAData, 0o600)).To(Succeed())
	path := filepath.Join(dir, "config")
	Expect(os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: envtest
clusters: [{name: envtest, cluster: {server: %q, certificate-authority: ca.crt}}]
contexts: [{name: envtest, context: {cluster: envtest, user: u, namespace: %s}}]
users:
- name: u
  user: %s
`, cluster.Server, namespace, user)), 0o600)).To(Succeed())
	return path
}

// readyz is what the probe server at addr answers on /readyz/authvault:
// the status code and the body.
func readyz(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/readyz/authvault")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, body), err
}
