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
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/authvault/authvault/testkit/browser"
	"github.com/authvault/authvault/testkit/testpki"
	"github.com/authvault/authvault/testkit/testwait"
)

// The addon pattern for a person: kubectl proxy → the API server's
// aggregation layer → addon-proxy --apiservice → examples/dashboard,
// which knows the user by name from the headers alone.
var _ = Describe("A person in a browser, through kubectl proxy and the aggregation layer", Ordered, func() {
	const (
		group  = "dashboard.authvault.dev"
		prefix = "/apis/" + group + "/v1"
	)
	var (
		proxies  = map[string]string{} // user → its kubectl proxy's URL
		addon    string                // addon-proxy's own address (https)
		addonLog func() string
	)

	BeforeAll(func(ctx SpecContext) {
		ns := newNamespace("dashboard")
		dashAddr := freeAddr()
		dash := exec.Command(buildExample("dashboard"), "--listen", dashAddr)
		dash.Stdout, dash.Stderr = GinkgoWriter, GinkgoWriter
		Expect(dash.Start()).To(Succeed())
		DeferCleanup(func() { _ = dash.Process.Kill(); _ = dash.Wait() })

		// The aggregator reaches the Service by name: its certificate
		// names addon-proxy.NS.svc, signed by the CA the APIService gives.
		servingCA := testpki.NewCA(GinkgoT())
		certPEM, keyPEM := servingCA.Issue(GinkgoT(), "addon-proxy."+ns+".svc", true)
		dir := GinkgoT().TempDir()
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		Expect(os.WriteFile(certFile, certPEM, 0o600)).To(Succeed())
		Expect(os.WriteFile(keyFile, keyPEM, 0o600)).To(Succeed())
		var plain string
		plain, _, addonLog = startAddonProxyLogged(ctx, "--upstream", "http://"+dashAddr, "--audience", "dashboard",
			"--apiservice", group+"/v1", "--tls-cert-file", certFile, "--tls-key-file", keyFile)
		addon = strings.Replace(plain, "http://", "https://", 1)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(addon, "https://"))

		By("registering the APIService on an ExternalName Service of localhost")
		_, err := admin.CoreV1().Services(ns).Create(ctx, &corev1.Service{
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

	It("in a real browser: shows the user's name, keeps a note under it; another site can neither post one nor read the page", func(ctx SpecContext) {
		page := proxies["alice"] + prefix + "/notes"
		run, cancel := browser.New(GinkgoT())
		DeferCleanup(cancel)
		step := func(actions ...chromedp.Action[chromedp.Void]) {
			GinkgoHelper()
			c, stop := context.WithTimeout(run, testwait.Hang)
			defer stop()
			Expect(chromedp.Do(c, actions...)).To(Succeed())
		}
		// text is the text of the element with id, or why there is none
		// (a page still loading): polled.
		text := func(id string) string {
			c, stop := context.WithTimeout(run, testwait.Hang)
			defer stop()
			got, err := chromedp.Run(c, chromedp.Text(chromedp.ID(id)))
			if err != nil {
				return err.Error()
			}
			return got
		}
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
