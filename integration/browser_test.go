package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/authvault/authvault/testkit/browser"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

// The addon pattern for a person: kubectl proxy → the API server's
// aggregation layer → addon-proxy --apiservice → examples/dashboard, which
// takes the person addon-proxy names only over addon-proxy's client
// certificate, and lists ConfigMaps as them.
var _ = Describe("A person in a browser, through kubectl proxy and the aggregation layer", Ordered, func() {
	const (
		group  = "dashboard.authvault.dev"
		prefix = "/apis/" + group + "/v1"
	)
	var (
		proxies  = map[string]string{} // user → its kubectl proxy's URL
		addon    string                // addon-proxy's own address (https)
		addonLog func() string

		dashboardURL    string       // the dashboard's own address (https), behind addon-proxy
		dashboardCA     *testpki.CA  // signs its serving certificate
		dashboardUser   string       // who it logs in as
		dashboardConfig *rest.Config // its own credential
		dashboardLog    func() string
		forgedPair      tls.Certificate       // a client certificate named addon-proxy, of another CA
		teamA, teamB    string                // namespaces whose ConfigMaps devs and ops may list
		dashboardNS     string                // the dashboard's ServiceAccount's
		unbind          func(context.Context) // removes the impersonation RBAC bound now
	)

	// configMaps is the dashboard's ConfigMaps page of namespace ns ("":
	// its default) as user, through their kubectl proxy, with headers h.
	configMaps := func(user, ns string, h http.Header) (int, string) {
		GinkgoHelper()
		target := proxies[user] + prefix + "/configmaps"
		if ns != "" {
			target += "?namespace=" + ns
		}
		code, body, _ := get(target, "", h)
		return code, body
	}

	BeforeAll(func(ctx SpecContext) {
		ns := newNamespace("dashboard")
		dir := GinkgoT().TempDir()
		write := func(name string, data []byte) string {
			path := filepath.Join(dir, name)
			Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
			return path
		}

		By("the dashboard, verifying addon-proxy's client certificate, logged in as itself")
		// Its own identity: a client certificate whose name RBAC reads as
		// the ServiceAccount deploy/dashboard binds, in the group whose
		// requests the API server audits.
		dashboardUser = "system:serviceaccount:" + ns + ":dashboard"
		me, err := cluster.Env.AddUser(envtest.User{Name: dashboardUser, Groups: []string{testcluster.AuditedGroup}}, nil)
		Expect(err).NotTo(HaveOccurred())
		dashboardConfig = me.Config()
		dashKubeconfig := writeKubeconfig(fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}",
			base64.StdEncoding.EncodeToString(dashboardConfig.CertData), base64.StdEncoding.EncodeToString(dashboardConfig.KeyData)))
		upstreamCA, proxyClientCA := testpki.NewCA(GinkgoT()), testpki.NewCA(GinkgoT())
		dashCert, dashKey := upstreamCA.Issue(GinkgoT(), "dashboard", true)
		clientCert, clientKey := proxyClientCA.Issue(GinkgoT(), "addon-proxy", false)
		forgedCert, forgedKey := testpki.NewCA(GinkgoT()).Issue(GinkgoT(), "addon-proxy", false)
		forgedPair, err = tls.X509KeyPair(forgedCert, forgedKey)
		Expect(err).NotTo(HaveOccurred())
		teamA, teamB = newNamespace("team-a"), newNamespace("team-b")
		dashAddr := freeAddr()
		dashboardURL = "https://" + dashAddr
		dash := exec.Command(buildExample("dashboard"), "--listen", dashAddr,
			"--tls-cert-file", write("dash.crt", dashCert), "--tls-key-file", write("dash.key", dashKey),
			"--proxy-client-ca-file", write("proxy-client-ca.crt", proxyClientCA.PEM),
			"--kubeconfig", dashKubeconfig, "--namespace", teamA)
		dash.Env = append(os.Environ(), "KUBECONFIG=")
		var dashLogs strings.Builder
		var dashMu sync.Mutex
		dash.Stdout, dash.Stderr = lockedWriter{&dashLogs, &dashMu}, lockedWriter{&dashLogs, &dashMu}
		Expect(dash.Start()).To(Succeed())
		DeferCleanup(func() {
			_ = dash.Process.Kill()
			_ = dash.Wait()
			dashMu.Lock()
			defer dashMu.Unlock()
			fmt.Fprintf(GinkgoWriter, "dashboard log:\n%s", dashLogs.String())
		})
		dashboardLog = func() string { dashMu.Lock(); defer dashMu.Unlock(); return dashLogs.String() }
		insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: upstreamCA.Pool}}}
		Eventually(func() int {
			resp, err := insecure.Get(dashboardURL + "/healthz")
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Equal(200))
		dashboardCA = upstreamCA

		// The aggregator reaches the Service by name: its certificate
		// names addon-proxy.NS.svc, signed by the CA the APIService gives.
		servingCA := testpki.NewCA(GinkgoT())
		certPEM, keyPEM := servingCA.Issue(GinkgoT(), "addon-proxy."+ns+".svc", true)
		certFile, keyFile := write("tls.crt", certPEM), write("tls.key", keyPEM)
		var plain string
		plain, _, addonLog = startAddonProxyLogged(ctx, "--upstream", dashboardURL, "--audience", "dashboard",
			"--upstream-ca-file", write("upstream-ca.crt", upstreamCA.PEM),
			"--upstream-client-cert-file", write("client.crt", clientCert), "--upstream-client-key-file", write("client.key", clientKey),
			"--apiservice", group+"/v1", "--tls-cert-file", certFile, "--tls-key-file", keyFile)
		addon = strings.Replace(plain, "http://", "https://", 1)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(addon, "https://"))

		By("registering the APIService on an ExternalName Service of localhost")
		_, err = admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "addon-proxy"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		dyn, err := dynamic.NewForConfig(cluster.Admin)
		Expect(err).NotTo(HaveOccurred())
		apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
		_, err = apiServices.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": "v1." + group},
			"spec": map[string]any{
				"group": group, "version": "v1", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
				"service":  map[string]any{"namespace": ns, "name": "addon-proxy", "port": mustAtoi(port)},
				"caBundle": base64.StdEncoding.EncodeToString(servingCA.PEM),
			},
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = apiServices.Delete(ctx, "v1."+group, metav1.DeleteOptions{}) })
		Eventually(func() string {
			got, err := apiServices.Get(ctx, "v1."+group, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Available" {
					return fmt.Sprint(m["status"], ": ", m["message"])
				}
			}
			return "no condition"
		}).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).Should(HavePrefix("True"), "the aggregator's availability check, answered by addon-proxy's discovery")

		By("RBAC: alice and bob may use the dashboard, carol may not")
		_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "dashboard-user-"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{group}, Resources: []string{"notes"}, Verbs: []string{"list", "watch", "create"}},
				{APIGroups: []string{group}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		roles, err := admin.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		var role string
		for _, r := range roles.Items {
			if strings.HasPrefix(r.Name, "dashboard-user-") {
				role = r.Name
			}
		}
		_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "dashboard-users-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice"}, {Kind: "User", Name: "bob"}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("RBAC: alice's group devs may list the ConfigMaps of team-a, bob's group ops those of team-b")
		for ns, team := range map[string]string{teamA: "devs", teamB: "ops"} {
			_, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "configmap-readers"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-reader"},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: team}},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		for ns, names := range map[string][]string{teamA: {"alpha-1", "alpha-2"}, teamB: {"beta-1"}} {
			for _, name := range names {
				_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
		}
		By("deploy/dashboard: the dashboard may act as people only to list ConfigMaps (constrained impersonation)")
		dashboardNS = ns
		unbind = bindImpersonation(ctx, ns, "impersonate-constrained.yaml")
		DeferCleanup(func(ctx SpecContext) { unbind(ctx) })

		By("each user's own kubectl proxy")
		for name, groups := range map[string][]string{"alice": {"devs"}, "bob": {"ops", "oncall"}, "carol": nil} {
			u, err := cluster.Env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
			Expect(err).NotTo(HaveOccurred())
			cfg := u.Config()
			kubeconfig := writeKubeconfig(fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}",
				base64.StdEncoding.EncodeToString(cfg.CertData), base64.StdEncoding.EncodeToString(cfg.KeyData)))
			proxies[name] = startKubectlProxy(ctx, kubeconfig)
		}
	}, NodeTimeout(5*time.Minute))

	It("tells each user's name to the service, and the API server refuses one its RBAC does not allow", func(ctx SpecContext) {
		for user, groups := range map[string]string{"alice": "devs, system:authenticated", "bob": "ops, oncall, system:authenticated"} {
			code, body, _ := get(proxies[user]+prefix+"/notes", "", nil)
			Expect(code).To(Equal(200), body)
			Expect(body).To(ContainSubstring(`id="user">` + user + `<`))
			Expect(body).To(ContainSubstring(groups))
		}
		before := dashboardNotes(proxies["alice"] + prefix + "/notes")
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, _ := http.NewRequestWithContext(ctx, method, proxies["carol"]+prefix+"/notes", strings.NewReader("text=from+carol"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusForbidden), string(body))
			Expect(string(body)).To(ContainSubstring(`"kind":"Status"`), "the API server's 403, not the service's")
			Expect(string(body)).To(ContainSubstring(`User \"carol\"`))
		}
		Expect(dashboardNotes(proxies["alice"]+prefix+"/notes")).To(Equal(before), "carol's POST reached the service")
	})

	It("never trusts X-Remote-User sent to addon-proxy without the front proxy's certificate", func(ctx SpecContext) {
		other := testpki.NewCA(GinkgoT())
		certPEM, keyPEM := other.Issue(GinkgoT(), "front-proxy-client", false)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		Expect(err).NotTo(HaveOccurred())
		before := dashboardNotes(proxies["alice"] + prefix + "/notes")
		for name, certs := range map[string][]tls.Certificate{"no client certificate": nil, "another CA's, with the allowed name": {pair}} {
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, addon+prefix+"/notes", strings.NewReader("text=forged"))
			req.Header.Set("X-Remote-User", "alice")
			req.Header.Set("X-Remote-Group", "system:masters")
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := client.Do(req)
			Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), name)
		}
		Expect(dashboardNotes(proxies["alice"]+prefix+"/notes")).To(Equal(before), "a forged caller's note was kept")
		Expect(addonLog()).NotTo(ContainSubstring("forged"))
	})

	It("trusts a CA added to the API server's ConfigMap without a restart, and refuses it once removed", func(ctx SpecContext) {
		added := testpki.NewCA(GinkgoT())
		certPEM, keyPEM := added.Issue(GinkgoT(), "front-proxy-client", false)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		Expect(err).NotTo(HaveOccurred())
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}}}
		DeferCleanup(client.CloseIdleConnections)
		as := func(user string) int {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, addon+prefix+"/notes", nil)
			req.Header.Set("X-Remote-User", user)
			resp, err := client.Do(req)
			if err != nil {
				return 0
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && !strings.Contains(string(body), `id="user">`+user+`<`) {
				return -1 // served as someone else
			}
			return resp.StatusCode
		}
		Expect(as("dave")).To(Equal(http.StatusUnauthorized), "a CA the API server does not publish")

		cms := admin.CoreV1().ConfigMaps("kube-system")
		const key = "requestheader-client-ca-file"
		setBundle := func(ctx context.Context, bundle string) time.Time {
			GinkgoHelper()
			Eventually(func() error {
				cm, err := cms.Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
				if err != nil {
					return err
				}
				cm.Data[key] = bundle
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				return err // a conflict with the API server's own controller: again
			}).WithTimeout(testwait.Hang).Should(Succeed())
			return time.Now()
		}
		cm, err := cms.Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		original := cm.Data[key]
		DeferCleanup(func(ctx SpecContext) { setBundle(ctx, original) })

		start := setBundle(ctx, strings.TrimRight(original, "\n")+"\n"+string(added.PEM))
		Eventually(func() int { return as("dave") }).WithTimeout(testwait.Hang).WithPolling(10 * time.Millisecond).Should(Equal(200))
		report("addon-proxy: a CA added to kube-system/extension-apiserver-authentication trusted %v after the update", time.Since(start).Round(time.Millisecond))
		code, _, _ := get(proxies["alice"]+prefix+"/notes", "", nil)
		Expect(code).To(Equal(200), "the API server's own front proxy, still trusted")

		start = setBundle(ctx, original)
		Eventually(func() int { return as("dave") }).WithTimeout(testwait.Hang).WithPolling(10 * time.Millisecond).Should(Equal(http.StatusUnauthorized))
		report("addon-proxy: the CA removed from it refused %v after the update", time.Since(start).Round(time.Millisecond))
		code, _, _ = get(proxies["alice"]+prefix+"/notes", "", nil)
		Expect(code).To(Equal(200))
	})

	It("serves nothing private at the group-version's root, which every authenticated user may GET", func(ctx SpecContext) {
		code, body, _ := get(proxies["alice"]+prefix+"/notes", "", nil)
		Expect(code).To(Equal(200), body)
		code, body, _ = get(proxies["carol"]+prefix+"/", "", nil)
		Expect(code).To(Equal(200), "system:discovery lets carol GET the root: %s", body)
		Expect(body).To(ContainSubstring(`href="notes"`))
		Expect(body).NotTo(ContainSubstring(`id="notes"`))
		Expect(body).NotTo(ContainSubstring("alice"))
	})

	It("refuses a method override that RBAC did not authorize, and sends a posting browser back by a relative link", func(ctx SpecContext) {
		before := dashboardNotes(proxies["alice"] + prefix + "/notes")
		post := func(target string, h http.Header) (int, string) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader("text=overridden"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range h {
				req.Header[k] = v
			}
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := client.Do(req)
			Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(body)
		}
		for _, h := range []http.Header{{"X-Http-Method-Override": {"DELETE"}}, {"X-Http-Method": {"DELETE"}}, {"X-Method-Override": {"DELETE"}}} {
			code, body := post(proxies["alice"]+prefix+"/notes", h)
			Expect(code).To(Equal(http.StatusForbidden), "%v: %s", h, body)
		}
		code, body := post(proxies["alice"]+prefix+"/notes?_method=DELETE", nil)
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(dashboardNotes(proxies["alice"]+prefix+"/notes")).To(Equal(before), "an overridden POST reached the dashboard")

		code, body = post(proxies["alice"]+prefix+"/notes", nil)
		Expect(code).To(Equal(200), body)
		Expect(body).To(ContainSubstring(`<a href="notes">`), "the page after a POST links to the notes relative to the page, not by addon-proxy's address")
		Expect(body).NotTo(ContainSubstring(addon))
	})

	It("refuses a WebSocket opened for a page of another site, through kubectl proxy and the aggregator; serves one of its own origin", func(ctx SpecContext) {
		target := "ws" + strings.TrimPrefix(proxies["alice"], "http") + prefix + "/notes?watch=1"
		origin := proxies["alice"]
		dial := func(h http.Header) (int, string) {
			conn, resp, err := (&websocket.Dialer{HandshakeTimeout: testwait.Hang}).DialContext(ctx, target, h)
			if err != nil {
				Expect(resp).NotTo(BeNil(), "%v", err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode, string(body)
			}
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(testwait.Hang))
			_, msg, err := conn.ReadMessage()
			Expect(err).NotTo(HaveOccurred())
			return http.StatusSwitchingProtocols, string(msg)
		}
		code, body := dial(http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}})
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).To(ContainSubstring("--trusted-origins"))
		Expect(body).NotTo(ContainSubstring(`"author"`))
		code, body = dial(http.Header{"Origin": {"https://evil.example"}})
		Expect(code).To(Equal(http.StatusForbidden), "a browser without Sec-Fetch-Site: %s", body)

		code, body = dial(http.Header{"Origin": {origin}, "Sec-Fetch-Site": {"same-origin"}})
		Expect(code).To(Equal(http.StatusSwitchingProtocols), body)
		Expect(body).To(ContainSubstring(`"author":"alice"`))
	})

	It("answers front-proxy callers 503 while the API server's ConfigMap is deleted, and serves them once the API server writes it back", func(ctx SpecContext) {
		cms := admin.CoreV1().ConfigMaps("kube-system")
		saved, err := cms.Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			// Should the API server not write it back, the other specs
			// still need it.
			if _, err := cms.Get(ctx, saved.Name, metav1.GetOptions{}); err != nil {
				saved.ResourceVersion = ""
				_, _ = cms.Create(ctx, saved, metav1.CreateOptions{})
			}
		})
		Expect(cms.Delete(ctx, saved.Name, metav1.DeleteOptions{})).To(Succeed())
		deleted := time.Now()
		Eventually(func() error {
			_, err := cms.Get(ctx, saved.Name, metav1.GetOptions{})
			return err
		}).WithTimeout(2*time.Minute).WithPolling(50*time.Millisecond).Should(Succeed(), "kube-apiserver writes its ConfigMap back")
		back := time.Since(deleted)
		Eventually(func() int { code, _, _ := get(proxies["alice"]+prefix+"/notes", "", nil); return code }).
			WithTimeout(testwait.Hang).WithPolling(50 * time.Millisecond).Should(Equal(200))
		report("addon-proxy: kube-system/extension-apiserver-authentication deleted: written back by the API server after %v, front-proxy callers served again %v after the deletion",
			back.Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))
		Expect(addonLog()).To(ContainSubstring("was deleted"), "addon-proxy saw the deletion and said so")
	})

	It("lists ConfigMaps as each person, by constrained impersonation and by classic: alice sees team-a's, bob gets the API server's 403 as a page, the audit log names both", func(ctx SpecContext) {
		for _, file := range []string{"impersonate-constrained.yaml", "impersonate-classic.yaml"} {
			By(file)
			if file != "impersonate-constrained.yaml" {
				unbind(ctx)
				unbind = bindImpersonation(ctx, dashboardNS, file)
			}
			constraint := "impersonate:user-info"
			if file == "impersonate-classic.yaml" {
				constraint = "-"
			}
			// Until the API server has forgotten the constrained
			// impersonations it allowed (it keeps each 10 s), a switch
			// to classic shows as constrained: asked again until the
			// audit log names the mode bound now.
			Eventually(func(g Gomega) {
				code, body := configMaps("alice", "", nil)
				g.Expect(code).To(Equal(200), body)
				g.Expect(listedConfigMaps(body)).To(Equal("alpha-1,alpha-2"), "alice's own view of team-a")
				code, body = configMaps("alice", teamB, nil)
				g.Expect(code).To(Equal(http.StatusForbidden), body)
				g.Expect(body).To(ContainSubstring(`<p id="forbidden">You may not list ConfigMaps in ` + teamB + `.</p>`))
				g.Expect(body).To(ContainSubstring(`User &#34;alice&#34; cannot list resource &#34;configmaps&#34;`), "the API server's words, naming her")
				g.Expect(body).NotTo(ContainSubstring("beta-1"))
				code, body = configMaps("bob", "", nil)
				g.Expect(code).To(Equal(http.StatusForbidden), body)
				g.Expect(body).To(ContainSubstring(`User &#34;bob&#34; cannot list`))
				g.Expect(body).NotTo(ContainSubstring("alpha-"))
				code, body = configMaps("bob", teamB, nil)
				g.Expect(code).To(Equal(200), body)
				g.Expect(listedConfigMaps(body)).To(Equal("beta-1"), "bob's own view of team-b")
				g.Eventually(func() []string { return impersonations(dashboardUser) }).WithTimeout(5*time.Second).Should(ContainElements(
					fmt.Sprintf("alice %s list %s/configmaps 200", constraint, teamA),
					fmt.Sprintf("alice %s list %s/configmaps 403", constraint, teamB),
					fmt.Sprintf("bob %s list %s/configmaps 403", constraint, teamA),
					fmt.Sprintf("bob %s list %s/configmaps 200", constraint, teamB),
				), "the audit log names the dashboard and the person it acted as, for each request")
			}).WithTimeout(testwait.Hang).WithPolling(time.Second).Should(Succeed())
			code, body := configMaps("carol", "", nil)
			Expect(code).To(Equal(http.StatusForbidden), body)
			Expect(body).To(ContainSubstring(`"kind":"Status"`), "carol may not use the dashboard: the API server refuses her before it")

			By(file + ": what else the dashboard's own credential may do as alice")
			asAlice := rest.CopyConfig(dashboardConfig)
			asAlice.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"devs"}}
			direct, err := kubernetes.NewForConfig(asAlice)
			Expect(err).NotTo(HaveOccurred())
			// Any authenticated person may ask who they are: alice may,
			// the dashboard acting as her may only list ConfigMaps.
			_, getErr := direct.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
			asAlice.Impersonate.Groups = append(asAlice.Impersonate.Groups, "system:masters")
			masters, err := kubernetes.NewForConfig(asAlice)
			Expect(err).NotTo(HaveOccurred())
			_, mastersErr := masters.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
			if file == "impersonate-constrained.yaml" {
				Expect(apierrors.IsForbidden(getErr)).To(BeTrue(), "constrained: acting as alice for anything but a list of ConfigMaps: %v", getErr)
				Expect(apierrors.IsForbidden(mastersErr)).To(BeTrue(), "constrained: acting as a member of system:masters: %v", mastersErr)
			} else {
				Expect(getErr).NotTo(HaveOccurred(), "classic: acting as alice for anything she may do")
				Expect(mastersErr).NotTo(HaveOccurred(), "classic: acting as anyone in any group, system:masters too: why deploy/ prefers constrained")
			}
		}
		unbind(ctx)
		unbind = bindImpersonation(ctx, dashboardNS, "impersonate-constrained.yaml")
	})

	It("tells a member of system:masters, whom constrained impersonation never acts as, why, instead of blaming RBAC", func(ctx SpecContext) {
		kubeconfig := writeKubeconfig(fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}",
			base64.StdEncoding.EncodeToString(cluster.Admin.CertData), base64.StdEncoding.EncodeToString(cluster.Admin.KeyData)))
		adminProxy := startKubectlProxy(ctx, kubeconfig)
		code, body, _ := get(adminProxy+prefix+"/configmaps", "", nil)
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).To(ContainSubstring("does not let the dashboard act as a member of system:masters"))
		// The API server's words name the first impersonation mode it
		// tried (the last that served this request's kind, here classic
		// from an earlier spec), not always system:masters.
		Expect(body).To(ContainSubstring(`<q id="reason">`))
		Expect(body).NotTo(ContainSubstring("alpha-"))
	})

	It("shows a person whose access is revoked the refusal at their next click, with no restart and nothing cached", func(ctx SpecContext) {
		Eventually(func() string { _, body := configMaps("alice", "", nil); return listedConfigMaps(body) }).
			WithTimeout(testwait.Hang).Should(Equal("alpha-1,alpha-2"))
		bindings := admin.RbacV1().RoleBindings(teamA)
		saved, err := bindings.Get(ctx, "configmap-readers", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(bindings.Delete(ctx, saved.Name, metav1.DeleteOptions{})).To(Succeed())
		revoked := time.Now()
		Eventually(func() int { code, _ := configMaps("alice", "", nil); return code }).
			WithTimeout(testwait.Hang).WithPolling(20 * time.Millisecond).Should(Equal(http.StatusForbidden))
		report("dashboard: alice's RoleBinding deleted, her next page refused %v after", time.Since(revoked).Round(time.Millisecond))
		_, body := configMaps("alice", "", nil)
		Expect(body).To(ContainSubstring("You may not list ConfigMaps in " + teamA))

		saved.ResourceVersion = ""
		_, err = bindings.Create(ctx, saved, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { _, body := configMaps("alice", "", nil); return listedConfigMaps(body) }).
			WithTimeout(testwait.Hang).Should(Equal("alpha-1,alpha-2"), "her access back, at her next click")
	})

	It("never makes an identity a caller sent into one it acts as: not a header through kubectl proxy, not one sent to the dashboard or addon-proxy directly", func(ctx SpecContext) {
		actedAsAlice := func() int {
			n := 0
			for _, e := range impersonations(dashboardUser) {
				if strings.HasPrefix(e, "alice ") {
					n++
				}
			}
			return n
		}
		before := actedAsAlice()
		forged := http.Header{
			"X-Remote-User": {"alice"}, "X-Remote-Group": {"devs"},
			"X-Authenticated-User": {"alice"}, "X-Authenticated-Groups": {"devs"}, "X-Authenticated-Uid": {"alice"},
		}

		By("bob, through kubectl proxy, naming alice in the identity headers of every hop")
		code, body := configMaps("bob", "", forged)
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).To(ContainSubstring(`User &#34;bob&#34; cannot list`), "bob's own refusal")
		Expect(body).To(ContainSubstring(`<strong id="user">bob</strong>`))

		By("bob, through kubectl proxy, asking the API server to impersonate alice")
		code, body = configMaps("bob", "", http.Header{"Impersonate-User": {"alice"}, "Impersonate-Group": {"devs"}})
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).To(ContainSubstring(`"kind":"Status"`), "the API server's refusal, before the dashboard")
		Expect(body).To(ContainSubstring(`User \"bob\" cannot impersonate`))

		By("a program on the dashboard's machine, with no client certificate or another CA's named addon-proxy")
		for name, certs := range map[string][]tls.Certificate{"no client certificate": nil, "another CA's": {forgedPair}} {
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: dashboardCA.Pool, Certificates: certs}}}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, dashboardURL+"/configmaps", nil)
			for k, v := range forged {
				req.Header[k] = v
			}
			resp, err := client.Do(req)
			Expect(err).NotTo(HaveOccurred())
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "%s: %s", name, page)
			Expect(string(page)).NotTo(ContainSubstring("alpha-"))
		}

		By("a ServiceAccount's bearer token sent to addon-proxy, naming alice in every identity header")
		newServiceAccount(ctx, dashboardNS, "intruder")
		token := saToken(ctx, dashboardNS, "intruder", "dashboard")
		insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, addon+prefix+"/configmaps", nil)
		for k, v := range forged {
			req.Header[k] = v
		}
		req.Header.Set("Impersonate-User", "alice")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := insecure.Do(req)
		Expect(err).NotTo(HaveOccurred())
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusForbidden), string(page))
		Expect(string(page)).To(ContainSubstring(`<strong id="user">system:serviceaccount:` + dashboardNS + `:intruder</strong>`))
		Expect(string(page)).To(ContainSubstring("does not let the dashboard act as you"), "deploy/dashboard grants no ServiceAccount impersonation")
		Expect(string(page)).NotTo(ContainSubstring("alpha-"))

		Eventually(func() []string { return impersonations(dashboardUser) }).WithTimeout(testwait.Hang).Should(
			ContainElement(HavePrefix("bob ")), "the forged requests were audited")
		Consistently(actedAsAlice).WithTimeout(time.Second).Should(Equal(before), "a request acted as alice")
		Expect(dashboardLog()).NotTo(ContainSubstring(token))
	})

	It("in a real browser: alice and bob each see the ConfigMaps the cluster lets them see, and a page that says what they may not", func(ctx SpecContext) {
		_, step, text := chromium()
		By("alice follows the notes page's link")
		step(chromedp.Navigate(proxies["alice"] + prefix + "/notes"))
		Eventually(func() string { return text("user") }).WithTimeout(testwait.Hang).Should(Equal("alice"))
		step(chromedp.Click(chromedp.ID("configmaps-link")))
		Eventually(func() string { return text("configmaps") }).WithTimeout(testwait.Hang).Should(And(
			ContainSubstring("alpha-1"), ContainSubstring("alpha-2"), Not(ContainSubstring("beta-1"))))
		Expect(text("namespace")).To(Equal(teamA))

		By("bob, on the same page through his own kubectl proxy")
		step(chromedp.Navigate(proxies["bob"] + prefix + "/configmaps"))
		Eventually(func() string { return text("forbidden") }).WithTimeout(testwait.Hang).Should(Equal("You may not list ConfigMaps in " + teamA + "."))
		Expect(text("reason")).To(ContainSubstring(`User "bob" cannot list resource "configmaps"`))
		step(chromedp.Navigate(proxies["bob"] + prefix + "/configmaps?namespace=" + teamB))
		Eventually(func() string { return text("configmaps") }).WithTimeout(testwait.Hang).Should(Equal("beta-1"))
	})

	It("in a real browser: shows the user's name, keeps a note under it; another site can neither post one nor read the page", func(ctx SpecContext) {
		page := proxies["alice"] + prefix + "/notes"
		run, step, text := chromium()
		// bodyText is the whole page's text, or why there is none.
		bodyText := func() string {
			c, stop := context.WithTimeout(run, testwait.Hang)
			defer stop()
			got, err := chromedp.Run(c, chromedp.Text(chromedp.CSS("body")))
			if err != nil {
				return err.Error()
			}
			return got
		}
		step(chromedp.Navigate(page))
		Eventually(func() string { return text("user") }).WithTimeout(testwait.Hang).Should(Equal("alice"))
		Expect(text("groups")).To(ContainSubstring("devs"))
		step(chromedp.SendKeys(chromedp.ID("text"), "hello from the browser"))
		c, stop := context.WithTimeout(run, testwait.Hang)
		resp, err := chromedp.RunResponse(c, chromedp.Submit(chromedp.ID("add")))
		stop()
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Status).To(BeEquivalentTo(200), "the form's POST: %s %v", resp.URL, resp.Headers)
		Eventually(func() string { return text("notes") }).WithTimeout(testwait.Hang).Should(ContainSubstring("alice: hello from the browser"))
		Expect(dashboardNotes(page)).To(ContainSubstring("alice: hello from the browser"))

		By("a page of another site that submits a form to kubectl proxy")
		// 127.0.0.1 and localhost are two sites: the browser says so in
		// Sec-Fetch-Site, which is what addon-proxy reads.
		target := strings.Replace(page, "127.0.0.1", "localhost", 1)
		evil := evilSite(target)
		before := dashboardNotes(page)
		step(chromedp.Navigate(evil + "/post"))
		Consistently(func() string { return dashboardNotes(page) }).WithTimeout(2*time.Second).Should(Equal(before), "another site's form kept a note")

		By("the page the refused form lands on says what happened and what to do")
		Eventually(bodyText).WithTimeout(testwait.Hang).Should(And(
			ContainSubstring("cross-origin request refused"), ContainSubstring("addon-proxy --trusted-origins")))

		By("a cross-origin fetch cannot read the page")
		step(chromedp.Navigate(evil + "/read"))
		Eventually(func() string { return text("result") }).WithTimeout(testwait.Hang).Should(HavePrefix("blocked"))

		By("a page of another site that opens a WebSocket to the notes reads nothing")
		step(chromedp.Navigate(evil + "/ws"))
		Eventually(func() string { return text("result") }).WithTimeout(testwait.Hang).Should(HavePrefix("closed"))
		Expect(text("result")).NotTo(ContainSubstring("author"))
		Expect(addonLog()).To(ContainSubstring(`"crossOrigin":`), "one INFO line for the refusals, at the default level")
	})
})

// evilSite serves pages of another origin that go for target, the
// dashboard's page through kubectl proxy: /post submits a note by a form,
// /read fetches the page and /ws opens its WebSocket, each showing what it
// could read in #result.
func evilSite(target string) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/post", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<html><body><form id="f" method="post" action="%s"><input name="text" value="forged by another site"></form>
<script>document.getElementById("f").submit()</script></body></html>`, html.EscapeString(target))
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, _ *http.Request) {
		ws := "ws" + strings.TrimPrefix(target, "http") + "?watch=1"
		fmt.Fprintf(w, `<html><body><div id="result">pending</div>
<script>let got = []; const ws = new WebSocket(%q);
ws.onmessage = m => { got.push(m.data) };
ws.onclose = () => { result.textContent = "closed: read " + got.length + " " + got.join(" ") }</script></body></html>`, ws)
	})
	mux.HandleFunc("/read", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<html><body><div id="result">pending</div>
<script>fetch(%q).then(r => r.text()).then(t => { result.textContent = "read: " + t }).catch(e => { result.textContent = "blocked: " + e })</script></body></html>`, target)
	})
	srv := httptest.NewServer(mux)
	DeferCleanup(srv.Close)
	return srv.URL
}

// chromium starts a headless Chromium for the spec and returns its
// context, step, which runs actions (each within testwait.Hang), and text,
// the text of the element with an id, or why there is none (a page still
// loading): polled.
func chromium() (context.Context, func(...chromedp.Action[chromedp.Void]), func(string) string) {
	run, cancel := browser.New(GinkgoT())
	DeferCleanup(cancel)
	step := func(actions ...chromedp.Action[chromedp.Void]) {
		GinkgoHelper()
		c, stop := context.WithTimeout(run, testwait.Hang)
		defer stop()
		Expect(chromedp.Do(c, actions...)).To(Succeed())
	}
	text := func(id string) string {
		c, stop := context.WithTimeout(run, testwait.Hang)
		defer stop()
		got, err := chromedp.Run(c, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			return err.Error()
		}
		return got
	}
	return run, step, text
}

var kubectlServing = regexp.MustCompile(`Starting to serve on ([0-9.]+:[0-9]+)`)

// startKubectlProxy runs kubectl proxy with kubeconfig on a free port of
// 127.0.0.1 and returns its URL; it is stopped at the end of the spec.
func startKubectlProxy(ctx context.Context, kubeconfig string) string {
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	cmd := exec.Command(kubectl, "proxy", "--kubeconfig", kubeconfig, "--address", "127.0.0.1", "--port", "0")
	out, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = GinkgoWriter
	Expect(cmd.Start()).To(Succeed(), "kubectl from hack/envtest.sh")
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if m := kubectlServing.FindStringSubmatch(lines.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	var a string
	Eventually(addr).WithContext(ctx).WithTimeout(testwait.Hang).Should(Receive(&a))
	return "http://" + a
}

// dashboardNotes is the list of notes the dashboard shows at page.
func dashboardNotes(page string) string {
	_, body, _ := get(page, "", nil)
	start := strings.Index(body, `id="notes"`)
	if start < 0 {
		return "no notes in " + body
	}
	end := strings.Index(body[start:], "</ul>")
	if end < 0 {
		return body[start:]
	}
	return body[start : start+end]
}

func mustAtoi(s string) int64 {
	var n int64
	_, err := fmt.Sscan(s, &n)
	Expect(err).NotTo(HaveOccurred())
	return n
}
