package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/testkit/manifests"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testwait"
	"github.com/authvault/authvault/vault"
)

var (
	profilesGVR = schema.GroupVersionResource{Group: fleet.ProfileGroup, Version: "v1alpha1", Resource: "clusterprofiles"}
	crdGVR      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	installCRD  sync.Once
)

// profiles is the hub's ClusterProfile client, the CRD installed and
// established the first time.
func profiles(ctx context.Context) dynamic.Interface {
	client, err := dynamic.NewForConfig(cluster.Admin)
	Expect(err).NotTo(HaveOccurred())
	installCRD.Do(func() {
		var crd unstructured.Unstructured
		Expect(yaml.Unmarshal([]byte(manifests.ClusterProfileCRD), &crd.Object)).To(Succeed())
		_, err := client.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func() error {
			_, err := client.Resource(profilesGVR).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})
	return client
}

// putProfile writes the ClusterProfile ns/name offering the provider named
// with wl's server and CA, and extensions (name, value pairs).
func putProfile(ctx context.Context, ns, name, provider string, wl *testcluster.Cluster, extensions ...any) {
	client := profiles(ctx).Resource(profilesGVR).Namespace(ns)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.ProfileGroup + "/v1alpha1",
		"kind":       "ClusterProfile",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"clusterManager": map[string]any{"name": "integration"}},
	}}
	created, err := client.Create(ctx, u, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	var exts []any
	for i := 0; i+1 < len(extensions); i += 2 {
		exts = append(exts, map[string]any{"name": extensions[i], "extension": extensions[i+1]})
	}
	c := map[string]any{"server": wl.Server, "certificate-authority-data": base64.StdEncoding.EncodeToString(wl.CAData)}
	if exts != nil {
		c["extensions"] = exts
	}
	created.Object["status"] = map[string]any{"accessProviders": []any{map[string]any{"name": provider, "cluster": c}}}
	_, err = client.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// fetchProvider is the provider file's entry of the suite's test plugin,
// fetching its token from the URL a profile gives in PLUGIN_FETCH_URL.
func fetchProvider() fleet.AccessProvider {
	return fleet.AccessProvider{
		Name: "test-plugin",
		ExecConfig: &clientcmdapi.ExecConfig{Command: plugin, APIVersion: "client.authentication.k8s.io/v1",
			Env: []clientcmdapi.ExecEnvVar{{Name: "PLUGIN_MODE", Value: "fetch"}}},
		ProfileSourcedEnvVarsPolicy: fleet.EnvAppendIfNotExists,
	}
}

// profileSpecs are the fleet's specs on ClusterProfiles, for the two
// workload clusters the fleet's Describe starts.
func profileSpecs(workloads *[2]*testcluster.Cluster) {
	// watchProfiles runs WatchClusterProfiles on ns of the hub for the
	// rest of the spec, with the hub's config (and so its discovery).
	watchProfiles := func(f *fleet.Fleet, ns string, providers ...fleet.AccessProvider) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			done <- f.WatchClusterProfiles(ctx, fleet.ProfilesOptions{Config: cluster.Admin, Namespace: ns, Providers: providers})
		}()
		DeferCleanup(func() {
			cancel()
			Expect(<-done).To(Succeed())
		})
	}

	It("keeps two clusters from their ClusterProfiles serving under load while the plugin's tokens are revoked 3 s after issue, one informer start each", func(ctx SpecContext) {
		const duration = 30 * time.Second
		ns := newNamespace("profiles")
		reg := prometheus.NewRegistry()
		f := fleet.New(fleet.Options{Registerer: reg})
		DeferCleanup(f.Close)
		profiles(ctx)
		watchProfiles(f, ns, fetchProvider())

		members := make([]*clusterLoad, len(workloads))
		hits := make([]*atomic.Int64, len(workloads))
		for i, wl := range workloads {
			url, runs, stop := wl.Issuer.TokenEndpoint(time.Hour, 3*time.Second)
			DeferCleanup(stop)
			putProfile(ctx, ns, fmt.Sprintf("wl%d", i), "test-plugin", wl, fleet.ExtraEnvExtension, map[string]any{"PLUGIN_FETCH_URL": url})
			members[i], hits[i] = watchCluster(ctx, f, fmt.Sprintf("%s/wl%d", ns, i)), runs
		}
		loadClusters(ctx, members, duration)

		for i, m := range members {
			report("fleet from ClusterProfiles, cluster %s: %d requests in %v while each token was revoked 3 s after issue, %d caller-visible 401s, %d other errors, %d plugin runs, informer: %d list(s), %d watch start(s), %d add events; p50 %v, p99 %v, longest %v",
				m.name, m.stats.Requests, duration, m.stats.Unauthorized, m.stats.OtherErrors, hits[i].Load(), m.lists.Load(), m.watches.Load(), m.events.Load(),
				m.stats.P50, m.stats.P99, m.stats.Longest)
			Expect(m.stats.FirstError).NotTo(HaveOccurred(), m.name)
			Expect(m.stats.Unauthorized).To(BeZero(), m.name)
			Expect(m.stats.Requests).To(BeNumerically(">", 100), m.name)
			// A revoked token is refused once the API server's review cache
			// lets go of it, ReviewCacheTTL after it was last accepted.
			Expect(hits[i].Load()).To(BeNumerically(">=", int64(duration/testcluster.ReviewCacheTTL)-1), "%s: the plugin ran again as its tokens were refused", m.name)
			Expect(m.lists.Load()+m.watches.Load()).To(BeNumerically("<=", 2), "%s: the informer was started once", m.name)
			Expect(m.watches.Load()).To(Equal(int64(1)), "%s: its watch was started once, and never again", m.name)
			Expect(m.events.Load()).To(BeNumerically(">", 50), "%s: the watch kept delivering through the rotations", m.name)
			again, err := f.RESTConfig(ctx, m.name)
			Expect(err).NotTo(HaveOccurred())
			Expect(again).To(BeIdenticalTo(m.cfg), "the cluster's config is the same object after the rotations")
		}
	}, NodeTimeout(3*time.Minute))

	It("closes a cluster's vault and its connections when its ClusterProfile is deleted", func(ctx SpecContext) {
		ns := newNamespace("profiles-delete")
		f := fleet.New(fleet.Options{})
		DeferCleanup(f.Close)
		wl := workloads[0]
		port := portOf(wl.Server)
		before := socketsTo(port)
		profiles(ctx)
		watchProfiles(f, ns, fetchProvider())
		url, _, stop := wl.Issuer.TokenEndpoint(time.Hour, 0)
		DeferCleanup(stop)
		putProfile(ctx, ns, "gone", "test-plugin", wl, fleet.ExtraEnvExtension, map[string]any{"PLUGIN_FETCH_URL": url})
		name := ns + "/gone"
		Eventually(func() *vault.Vault { return f.Vault(name) }).WithTimeout(testwait.Hang).ShouldNot(BeNil())
		cfg, err := f.RESTConfig(ctx, name)
		Expect(err).NotTo(HaveOccurred())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(newSockets(socketsTo(port), before)).NotTo(BeEmpty(), "the vault's connection to the cluster")

		Expect(profiles(ctx).Resource(profilesGVR).Namespace(ns).Delete(ctx, "gone", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() *vault.Vault { return f.Vault(name) }).WithTimeout(testwait.Hang).Should(BeNil())
		Eventually(func() []string { return newSockets(socketsTo(port), before) }).WithTimeout(testwait.Hang).Should(BeEmpty(),
			"this process's connections to the cluster, beyond those it had before the fleet")
		_, err = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		Expect(err).To(MatchError(vault.ErrClosed))
	}, NodeTimeout(time.Minute))

	It("refuses a ClusterProfile whose access provider is not in the provider file, running nothing", func(ctx SpecContext) {
		ns := newNamespace("profiles-unknown")
		f := fleet.New(fleet.Options{})
		DeferCleanup(f.Close)
		wl := workloads[1]
		url, hits, stop := wl.Issuer.TokenEndpoint(time.Hour, 0)
		DeferCleanup(stop)
		profiles(ctx)
		watchProfiles(f, ns, fetchProvider())
		putProfile(ctx, ns, "stranger", "someone-elses-plugin", wl, fleet.ExtraEnvExtension, map[string]any{"PLUGIN_FETCH_URL": url})
		putProfile(ctx, ns, "known", "test-plugin", wl, fleet.ExtraEnvExtension, map[string]any{"PLUGIN_FETCH_URL": url})
		// The known one is the mark that the watch has seen both.
		Eventually(func() *vault.Vault { return f.Vault(ns + "/known") }).WithTimeout(testwait.Hang).ShouldNot(BeNil())
		Consistently(func() []string { return f.Names() }).WithTimeout(2 * time.Second).Should(Equal([]string{ns + "/known"}))
		Expect(hits.Load()).To(BeZero(), "nothing ran: the known cluster is not used yet, the stranger not added")
	}, NodeTimeout(time.Minute))
}
