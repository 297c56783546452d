package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/authvault/authvault/federation"
	"github.com/authvault/authvault/fleet"
	"github.com/authvault/authvault/handlers"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/manifests"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testlog"
	"github.com/authvault/authvault/vault"
)

// A fleet member reached with nothing stored but its address and CA: the
// hub mints a token for its ServiceAccount fleet-system/fleet-operator
// (TokenRequest, through the hub's own vault) for the member's audience,
// and the member's API server trusts the hub's issuer
// (--authentication-config). Two real API servers, each with its etcd.
var _ = Describe("A member that trusts the hub's ServiceAccount tokens", Ordered, Label("long"), func() {
	const ns, sa = "fleet-system", "fleet-operator"
	var (
		hub      *testcluster.Cluster
		member   *testcluster.Member
		hubAdmin kubernetes.Interface
		hubCfg   *rest.Config // the hub's own vault's
	)

	BeforeAll(func(ctx SpecContext) {
		var err error
		hub, err = testcluster.StartWith(testcluster.Options{IssuerDiscovery: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(hub.Stop)
		hubAdmin = kubernetes.NewForConfigOrDie(hub.Admin)
		_, err = hubAdmin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = hubAdmin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		member, err = hub.StartMember("member-1")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(member.Stop)
		Expect(member.Allow(ctx, ns, sa, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}})).To(Succeed())

		hubVault := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(hubVault.Close)
		hubVault.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			info := hub.Token(hub.Issuer.Issue(0))
			return &info, nil
		}, login.ID("hub issuer"))
		hubCfg, err = hubVault.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
	})

	// memberVault is a vault of the member whose one handler mints on the
	// hub for audiences, logging to logs when not nil.
	memberVault := func(hubCfg *rest.Config, logs *testlog.Buffer, audiences ...string) (*vault.Vault, kubernetes.Interface) {
		opts := vault.Options{NoFallback: true, MaxWait: 20 * time.Second}
		if logs != nil {
			opts.Logger = logs.Logger(1)
		}
		v := vault.New(opts)
		DeferCleanup(v.Close)
		v.OnLogin(federation.Login(federation.Config{
			Hub: hubCfg, Namespace: ns, ServiceAccount: sa, Audiences: audiences, Lifetime: 10 * time.Minute,
			Member: federation.Member{Server: member.Server, CAData: member.CAData},
		}), login.Backoff(250*time.Millisecond, 2*time.Second))
		cfg, err := v.RESTConfig(context.Background())
		Expect(err).NotTo(HaveOccurred())
		return v, kubernetes.NewForConfigOrDie(cfg)
	}
	listNamespaces := func(ctx context.Context, cs kubernetes.Interface) error {
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := cs.CoreV1().Namespaces().List(callCtx, metav1.ListOptions{})
		return err
	}
	// mint is a token of the hub's ServiceAccount for audiences (none:
	// the hub's own), minted by the hub's admin.
	mint := func(ctx context.Context, audiences ...string) string {
		tr, err := hubAdmin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	// status is the status code of a GET of /api/v1/namespaces on the
	// server with tok.
	status := func(ctx context.Context, server string, ca []byte, tok string) int {
		cfg := &rest.Config{Host: server, BearerToken: tok, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
		client, err := rest.HTTPClientFor(cfg)
		Expect(err).NotTo(HaveOccurred())
		url := strings.TrimSuffix(server, "/") + "/api/v1/namespaces"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		Expect(err).NotTo(HaveOccurred())
		resp, err := client.Do(req)
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			GinkgoWriter.Printf("%s GET %s: %d %s\n", time.Now().Format(time.StampMilli), url, resp.StatusCode, body)
		}
		return resp.StatusCode
	}

	It("refuses a token it cannot verify while the hub's keys are out of reach, and takes it once they are back", func(ctx SpecContext) {
		// The member fetches the hub's keys for its first token: here,
		// while the hub is down.
		tok := mint(ctx, "member-1")
		restarted := make(chan error, 1)
		go func() { restarted <- hub.RestartAPIServer(6 * time.Second) }()
		Eventually(func() error { _, err := hubAdmin.Discovery().ServerVersion(); return err }).Should(HaveOccurred())
		Expect(status(ctx, member.Server, member.CAData, tok)).To(Equal(http.StatusUnauthorized))
		Expect(<-restarted).To(Succeed())
		Eventually(func() int { return status(ctx, member.Server, member.CAData, tok) }).Should(Equal(http.StatusOK))
	})

	It("lists the member's namespaces with nothing stored but an address and a CA", func(ctx SpecContext) {
		start := time.Now()
		_, cs := memberVault(hubCfg, nil, "member-1")
		Expect(listNamespaces(ctx, cs)).To(Succeed())
		report("federation: a new vault's first list on the member took %v (a TokenRequest on the hub, then the member's verification)", time.Since(start).Round(time.Millisecond))
	})

	It("keeps the hub's and the member's tokens apart", func(ctx SpecContext) {
		Expect(status(ctx, member.Server, member.CAData, mint(ctx))).To(Equal(http.StatusUnauthorized), "the hub's own token on the member")
		Expect(status(ctx, hub.Server, hub.CAData, mint(ctx, "member-1"))).To(Equal(http.StatusUnauthorized), "the member's token on the hub")
		Expect(status(ctx, member.Server, member.CAData, mint(ctx, "member-1"))).To(Equal(http.StatusOK))
	})

	It("serves a Flux ConfigMap as Flux reads it, and refuses one that names another namespace's ServiceAccount, losing no other", func(ctx SpecContext) {
		var logs testlog.Buffer
		f := fleet.New(fleet.Options{Logger: logs.Logger(0)})
		DeferCleanup(f.Close)
		watchCtx, stop := context.WithCancel(context.Background())
		watched := make(chan error, 1)
		go func() {
			watched <- f.WatchFlux(watchCtx, fleet.FluxOptions{Config: hubCfg, Namespace: ns, Operator: ns + "/" + sa})
		}()
		DeferCleanup(func() { stop(); Expect(<-watched).To(Succeed()) })

		put := func(name string, data map[string]string) {
			_, err := hubAdmin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx context.Context) {
				_ = hubAdmin.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
			})
		}
		put("tenant-reach", map[string]string{"provider": "generic", "address": member.Server, "ca.crt": string(member.CAData), "audiences": "member-1", "serviceAccountName": "kube-system/default"})
		put("garbage", map[string]string{"provider": "generic", "address": "http://" + strings.TrimPrefix(member.Server, "https://")})
		put("unrelated", map[string]string{"color": "blue"})
		put("member-1", map[string]string{"provider": "generic", "address": member.Server, "ca.crt": string(member.CAData), "audiences": "member-1\n", "serviceAccountName": sa})

		Eventually(f.Names).Should(ConsistOf(ns + "/member-1"))
		cfg, err := f.RESTConfig(ctx, ns+"/member-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(listNamespaces(ctx, kubernetes.NewForConfigOrDie(cfg))).To(Succeed())
		Eventually(logs.String).Should(And(
			ContainSubstring(`"configMap"="fleet-system/tenant-reach"`),
			ContainSubstring(`never another's`),
			ContainSubstring(`"configMap"="fleet-system/garbage"`),
		))
		Expect(logs.String()).NotTo(ContainSubstring("unrelated"))

		Expect(hubAdmin.CoreV1().ConfigMaps(ns).Delete(ctx, "member-1", metav1.DeleteOptions{})).To(Succeed())
		Eventually(f.Names).Should(BeEmpty())
	})

	It("reaches a ClusterProfile's member through an access provider served in process, with the profile's namespace's ServiceAccount", func(ctx SpecContext) {
		client := dynamic.NewForConfigOrDie(hub.Admin)
		var crd unstructured.Unstructured
		Expect(yaml.Unmarshal([]byte(manifests.ClusterProfileCRD), &crd.Object)).To(Succeed())
		_, err := client.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		profiles := client.Resource(profilesGVR).Namespace(ns)
		Eventually(func() error { _, err := profiles.List(ctx, metav1.ListOptions{Limit: 1}); return err }).Should(Succeed())
		put := func(name string, cluster map[string]any) {
			created, err := profiles.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": fleet.ProfileGroup + "/v1alpha1", "kind": "ClusterProfile",
				"metadata": map[string]any{"name": name, "namespace": ns},
				"spec":     map[string]any{"clusterManager": map[string]any{"name": "integration"}},
			}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			created.Object["status"] = map[string]any{"accessProviders": []any{map[string]any{"name": "hub-tokens", "cluster": cluster}}}
			_, err = profiles.UpdateStatus(ctx, created, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		ca := base64.StdEncoding.EncodeToString(member.CAData)
		put("member-1", map[string]any{"server": member.Server, "certificate-authority-data": ca})
		put("through-a-proxy", map[string]any{"server": member.Server, "certificate-authority-data": ca, "proxy-url": "http://127.0.0.1:1"})

		var logs testlog.Buffer
		f := fleet.New(fleet.Options{Logger: logs.Logger(0)})
		DeferCleanup(f.Close)
		watchCtx, stop := context.WithCancel(context.Background())
		watched := make(chan error, 1)
		go func() {
			watched <- f.WatchClusterProfiles(watchCtx, fleet.ProfilesOptions{Config: hub.Admin, Namespace: ns, Providers: []fleet.AccessProvider{{
				Name: "hub-tokens", Federated: &fleet.FederatedAccess{Config: hubCfg, ServiceAccount: sa, Audiences: []string{"member-1"}},
			}}})
		}()
		DeferCleanup(func() { stop(); Expect(<-watched).To(Succeed()) })

		Eventually(f.Names).Should(ConsistOf(ns + "/member-1"))
		cfg, err := f.RESTConfig(ctx, ns+"/member-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(listNamespaces(ctx, kubernetes.NewForConfigOrDie(cfg))).To(Succeed())
		Eventually(logs.String).Should(ContainSubstring("proxy-url is set"))
	})

	It("reads a Cluster API kubeconfig Secret for its server and CA only, when asked, and logs in with the hub's tokens", func(ctx SpecContext) {
		kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: member-1
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: admin
  user: {token: a-stored-credential-never-sent}
contexts:
- name: admin@member-1
  context: {cluster: member-1, user: admin}
current-context: admin@member-1
`, member.Server, base64.StdEncoding.EncodeToString(member.CAData))
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "member-1-kubeconfig", Labels: map[string]string{fleet.ClusterNameLabel: "member-1"}},
			Data:       map[string][]byte{"value": []byte(kubeconfig)},
		}
		_, err := hubAdmin.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			_ = hubAdmin.CoreV1().Secrets(ns).Delete(ctx, secret.Name, metav1.DeleteOptions{})
		})

		f := fleet.New(fleet.Options{})
		DeferCleanup(f.Close)
		watchCtx, stop := context.WithCancel(context.Background())
		watched := make(chan error, 1)
		go func() {
			watched <- f.WatchSecrets(watchCtx, fleet.SecretsOptions{Config: hub.Admin, Namespace: ns,
				Federated: &fleet.FederatedAccess{Config: hubCfg, ServiceAccount: sa, Audiences: []string{"member-1"}}})
		}()
		DeferCleanup(func() { stop(); Expect(<-watched).To(Succeed()) })

		Eventually(f.Names).Should(ConsistOf(ns + "/member-1"))
		cfg, err := f.RESTConfig(ctx, ns+"/member-1")
		Expect(err).NotTo(HaveOccurred())
		cs := kubernetes.NewForConfigOrDie(cfg)
		Expect(listNamespaces(ctx, cs)).To(Succeed())
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.UserInfo.Username).To(Equal(testcluster.MemberUserPrefix+"system:serviceaccount:"+ns+":"+sa), "the hub's ServiceAccount, not the Secret's stored credential")
	})

	It("says which audience the member refused", func(ctx SpecContext) {
		_, cs := memberVault(hubCfg, nil, "member-2")
		err := listNamespaces(ctx, cs)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(ContainSubstring("401"), ContainSubstring("for audience member-2")))
	})

	It("says which ServiceAccount and permission the hub refused", func(ctx SpecContext) {
		_, err := hubAdmin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := hubAdmin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		nobody := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(nobody.Close)
		nobody.OnLogin(handlers.Static(hub.Token(tr.Status.Token)))
		nobodyCfg, err := nobody.RESTConfig(ctx)
		Expect(err).NotTo(HaveOccurred())
		_, cs := memberVault(nobodyCfg, nil, "member-1")
		err = listNamespaces(ctx, cs)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("serviceaccount fleet-system/fleet-operator: this identity may not create serviceaccounts/token in namespace fleet-system"))
	})

	It("serves on the token in hand while the hub is down for less than its life", func(ctx SpecContext) {
		_, cs := memberVault(hubCfg, nil, "member-1")
		Expect(listNamespaces(ctx, cs)).To(Succeed())
		restarted := make(chan error, 1)
		go func() { restarted <- hub.RestartAPIServer(5 * time.Second) }()
		var served, failed atomic.Int32
		for done := false; !done; {
			select {
			case err := <-restarted:
				Expect(err).NotTo(HaveOccurred())
				done = true
			case <-time.After(200 * time.Millisecond):
				if err := listNamespaces(ctx, cs); err != nil {
					failed.Add(1)
					GinkgoWriter.Println("list during the hub's outage:", err)
				} else {
					served.Add(1)
				}
			}
		}
		Expect(failed.Load()).To(BeZero())
		Expect(served.Load()).To(BeNumerically(">", 10))
	})

	It("stops minting when the ServiceAccount is deleted, while the member takes the tokens already minted, and mints again once it is back", func(ctx SpecContext) {
		inHand, cs := memberVault(hubCfg, nil, "member-1")
		Expect(listNamespaces(ctx, cs)).To(Succeed())
		Expect(hubAdmin.CoreV1().ServiceAccounts(ns).Delete(ctx, sa, metav1.DeleteOptions{})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			_, _ = hubAdmin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		})
		inHand.Refresh() // the new mint fails; the token in hand stays
		Consistently(func() error { return listNamespaces(ctx, cs) }).WithTimeout(3 * time.Second).Should(Succeed())

		_, fresh := memberVault(hubCfg, nil, "member-1")
		err := listNamespaces(ctx, fresh)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("serviceaccount fleet-system/fleet-operator: the ServiceAccount does not exist"))

		_, err = hubAdmin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, back := memberVault(hubCfg, nil, "member-1")
		Expect(listNamespaces(ctx, back)).To(Succeed())
	})

	It("serves on the token in hand after an abrupt switch of the hub's key, says the member does not trust the new one yet, and takes it after a reload", func(ctx SpecContext) {
		var logs testlog.Buffer
		inHand, cs := memberVault(hubCfg, &logs, "member-1")
		Expect(listNamespaces(ctx, cs)).To(Succeed())
		Expect(hub.SwitchServiceAccountKey(0)).To(Succeed())
		inHand.Refresh() // mints a token of the new key: the member rejects it
		Eventually(logs.String).Should(ContainSubstring("the member does not trust the hub's new key yet"))
		Consistently(func() error { return listNamespaces(ctx, cs) }).WithTimeout(3 * time.Second).Should(Succeed())
		_, fresh := memberVault(hubCfg, nil, "member-1") // no token in hand
		err := listNamespaces(ctx, fresh)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("rejected the hub's token for audience member-1"))

		Expect(member.ReloadAuthentication()).To(Succeed())
		start := time.Now()
		Eventually(func() int { return status(ctx, member.Server, member.CAData, mint(ctx, "member-1")) }).Should(Equal(http.StatusOK))
		report("federation: the member took the hub's new key %v after its authentication config was rewritten", time.Since(start).Round(100*time.Millisecond))
		inHand.Refresh()
		Eventually(func() error { return listNamespaces(ctx, cs) }).Should(Succeed())
	})

	It("fails nothing when the hub publishes its next key before it signs with it", func(ctx SpecContext) {
		Expect(hub.PublishServiceAccountKey(0)).To(Succeed())
		reloaded := time.Now()
		Expect(member.ReloadAuthentication()).To(Succeed()) // or wait out the member's hour
		Eventually(func(g Gomega) time.Time {
			// The reloaded authenticator fetches the keys for its first
			// token: an operator's traffic, here one request a poll.
			status(ctx, member.Server, member.CAData, mint(ctx, "member-1"))
			fetched, err := member.KeysFetched(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			return fetched
		}).Should(BeTemporally(">", reloaded))
		Expect(hub.SwitchServiceAccountKey(0)).To(Succeed())
		_, cs := memberVault(hubCfg, nil, "member-1")
		Expect(listNamespaces(ctx, cs)).To(Succeed())
		Expect(status(ctx, member.Server, member.CAData, mint(ctx, "member-1"))).To(Equal(http.StatusOK))
	})
})
