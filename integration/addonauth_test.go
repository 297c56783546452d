package integration

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/testkit/testwait"
)

const addonAudience = "greeter.addons.svc"

// saToken asks the API server for a token of ServiceAccount ns/name meant
// for audience.
func saToken(ctx context.Context, ns, name, audience string) string {
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

func newServiceAccount(ctx context.Context, ns, name string) {
	_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// greeter is the service behind the proxy: it greets the caller by the
// identity header, and records every header it was sent.
type greeter struct {
	mu   sync.Mutex
	seen []http.Header
}

func (g *greeter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.seen = append(g.seen, r.Header.Clone())
	g.mu.Unlock()
	if r.URL.Path == "/watch" {
		w.WriteHeader(200)
		for r.Context().Err() == nil {
			fmt.Fprintln(w, "tick")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		return
	}
	fmt.Fprintf(w, "hello %s", r.Header.Get("X-Authenticated-User"))
}

func (g *greeter) headers() []http.Header {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]http.Header(nil), g.seen...)
}

// reviewCounter counts the TokenReviews sent through a config.
type reviewCounter struct {
	rt    http.RoundTripper
	count atomic.Int64
}

func (c *reviewCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/tokenreviews") {
		c.count.Add(1)
	}
	return c.rt.RoundTrip(r)
}

func get(url, token string, h http.Header) (int, string, http.Header) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	for k, v := range h {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

var _ = Describe("addonauth against the API server", func() {
	It("forwards the callers the API server vouches for, and refuses garbage without asking it", func(ctx SpecContext) {
		ns := newNamespace("addon")
		newServiceAccount(ctx, ns, "client")
		counter := &reviewCounter{}
		cfg := rest.CopyConfig(cluster.Admin)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
		a, err := addonauth.New(addonauth.Options{Audience: addonAudience, Config: cfg, SuccessTTL: 2 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		up := &greeter{}
		srv := httptest.NewServer(a.Middleware(up))
		DeferCleanup(srv.Close)

		tok := saToken(ctx, ns, "client", addonAudience)
		code, body, _ := get(srv.URL+"/hello", tok, http.Header{"X-Remote-User": {"admin"}, "x-authenticated-user": {"admin"}})
		Expect(code).To(Equal(200))
		Expect(body).To(Equal("hello system:serviceaccount:" + ns + ":client"))
		h := up.headers()[0]
		Expect(h.Get("Authorization")).To(BeEmpty())
		Expect(h.Values("X-Authenticated-User")).To(Equal([]string{"system:serviceaccount:" + ns + ":client"}))
		Expect(h.Get("X-Remote-User")).To(BeEmpty())
		Expect(h.Values("X-Authenticated-Groups")).To(ContainElement("system:serviceaccounts:" + ns))

		other := saToken(ctx, ns, "client", "another.svc")
		code, _, hdr := get(srv.URL+"/hello", other, nil)
		Expect(code).To(Equal(401))
		Expect(hdr.Get("WWW-Authenticate")).To(ContainSubstring("not meant for this service"))

		before := counter.count.Load()
		for i := range 10_000 {
			tok := fmt.Sprintf("garbage-%d.%d.x", i, i)
			if i%2 == 0 {
				tok = base64.RawURLEncoding.EncodeToString([]byte(tok))
			}
			if _, err := a.Authenticate(ctx, tok); err == nil {
				Fail("a garbage token was accepted")
			}
		}
		Expect(counter.count.Load()-before).To(BeZero(), "garbage tokens cost TokenReviews")
		report("addonauth: 10,000 garbage tokens, %d TokenReviews", counter.count.Load()-before)

		By("deleting the ServiceAccount: its token is refused within the success TTL")
		Expect(admin.CoreV1().ServiceAccounts(ns).Delete(ctx, "client", metav1.DeleteOptions{})).To(Succeed())
		start := time.Now()
		Eventually(func() int { c, _, _ := get(srv.URL+"/hello", tok, nil); return c }).
			WithTimeout(testcluster.ReviewCacheTTL + testwait.Hang).WithPolling(200 * time.Millisecond).Should(Equal(401)) // the API server's own 10-s cache, then the success TTL
		report("addonauth: a deleted ServiceAccount's token refused %v after the deletion (success TTL 2 s)", time.Since(start).Round(10*time.Millisecond))
	}, NodeTimeout(2*time.Minute))

	It("runs as the addon-proxy sidecar: forwards, cuts a revoked caller's stream, limits each user", func(ctx SpecContext) {
		ns := newNamespace("sidecar")
		newServiceAccount(ctx, ns, "caller")
		newServiceAccount(ctx, ns, "watcher")
		up := &greeter{}
		upstream := httptest.NewServer(up)
		DeferCleanup(upstream.Close)
		proxy, ops := startAddonProxy(ctx, "--upstream", upstream.URL, "--audience", addonAudience,
			"--success-ttl", "1s", "--rate-per-user", "5", "--burst-per-user", "5", "--shutdown-grace", "2s")

		tok := saToken(ctx, ns, "caller", addonAudience)
		code, body, _ := get(proxy+"/hello", tok, http.Header{"X-Authenticated-Groups": {"system:masters"}})
		Expect(code).To(Equal(200))
		Expect(body).To(Equal("hello system:serviceaccount:" + ns + ":caller"))
		Expect(up.headers()[0].Values("X-Authenticated-Groups")).NotTo(ContainElement("system:masters"))
		code, _, _ = get(proxy+"/hello", "garbage", nil)
		Expect(code).To(Equal(401))

		By("the rate limit")
		limited := 0
		for range 20 {
			if c, _, h := get(proxy+"/hello", tok, nil); c == 429 {
				limited++
				Expect(h.Get("Retry-After")).NotTo(BeEmpty())
			}
		}
		Expect(limited).To(BeNumerically(">", 10))

		By("a stream ends once its caller's ServiceAccount is deleted")
		watchTok := saToken(ctx, ns, "watcher", addonAudience)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, proxy+"/watch", nil)
		req.Header.Set("Authorization", "Bearer "+watchTok)
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(resp.Body.Close)
		Expect(resp.StatusCode).To(Equal(200))
		lines := bufio.NewScanner(resp.Body)
		Expect(lines.Scan()).To(BeTrue())
		Expect(admin.CoreV1().ServiceAccounts(ns).Delete(ctx, "watcher", metav1.DeleteOptions{})).To(Succeed())
		deleted := time.Now()
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			for lines.Scan() {
			}
		}()
		// The API server caches its own answers for 10 s: revocation shows
		// within that plus the success TTL.
		Eventually(ended).WithTimeout(testcluster.ReviewCacheTTL + testwait.Hang).Should(BeClosed())
		report("addon-proxy: a watch ended %v after its ServiceAccount was deleted (success TTL 1 s)", time.Since(deleted).Round(10*time.Millisecond))

		By("a stream still open at shutdown: closed after the grace, and the proxy exits 0 (checked at cleanup)")
		newServiceAccount(ctx, ns, "lingerer")
		linger, _ := http.NewRequest(http.MethodGet, proxy+"/watch", nil)
		linger.Header.Set("Authorization", "Bearer "+saToken(ctx, ns, "lingerer", addonAudience))
		lingering, err := http.DefaultClient.Do(linger)
		Expect(err).NotTo(HaveOccurred())
		Expect(lingering.StatusCode).To(Equal(200))
		go func() { _, _ = io.Copy(io.Discard, lingering.Body); lingering.Body.Close() }()

		By("its metrics")
		_, metrics, _ := get(ops+"/metrics", "", nil)
		Expect(metrics).To(ContainSubstring(`addonauth_requests_total{result="rate_limited"}`))
		Expect(metrics).To(ContainSubstring(`addonauth_requests_ended_total{reason="revoked"} 1`))
		Expect(metrics).NotTo(ContainSubstring(tok[len(tok)-20:]))
	}, NodeTimeout(3*time.Minute))
})

// startAddonProxy builds cmd/addon-proxy, starts it with args, logged in
// as the cluster's admin through --kubeconfig, and returns its address
// and its ops address once /readyz answers. It is stopped with SIGTERM at
// the end of the spec, and must exit cleanly.
func startAddonProxy(ctx context.Context, args ...string) (string, string) {
	addr, ops, _ := startAddonProxyLogged(ctx, args...)
	return addr, ops
}

// startAddonProxyLogged is startAddonProxy that also returns what the
// proxy has logged so far.
func startAddonProxyLogged(ctx context.Context, args ...string) (string, string, func() string) {
	dir := GinkgoT().TempDir()
	bin := filepath.Join(dir, "addon-proxy")
	build := exec.Command("go", "build", "-o", bin, "../cmd/addon-proxy")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	user := fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}",
		base64.StdEncoding.EncodeToString(cluster.Admin.CertData), base64.StdEncoding.EncodeToString(cluster.Admin.KeyData))
	listen, opsListen := freeAddr(), freeAddr()
	cmd := exec.Command(bin, append([]string{"--kubeconfig", writeKubeconfig(user), "--listen", listen, "--ops-listen", opsListen}, args...)...)
	var logs strings.Builder
	var logMu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&logs, &logMu}, lockedWriter{&logs, &logMu}
	Expect(cmd.Start()).To(Succeed())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	DeferCleanup(func() {
		Expect(cmd.Process.Signal(os.Interrupt)).To(Succeed())
		Eventually(exited).WithTimeout(testwait.Hang).Should(Receive(BeNil()))
		logMu.Lock()
		defer logMu.Unlock()
		Expect(logs.String()).NotTo(ContainSubstring("eyJ"), "a token in the proxy's log") // JWTs start so
		fmt.Fprintf(GinkgoWriter, "addon-proxy log:\n%s", logs.String())
	})
	ops := "http://" + opsListen
	Eventually(func() int {
		resp, err := http.Get(ops + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(200))
	return "http://" + listen, ops, func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.String()
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

type lockedWriter struct {
	b  *strings.Builder
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

var _ = Describe("examples/addon", func() {
	It("greets the caller by the name the sidecar verified", func(ctx SpecContext) {
		ns := newNamespace("greeting")
		newServiceAccount(ctx, ns, "caller")
		greeterAddr := freeAddr()
		greeter := exec.Command(buildExample("addon/greeter"), "--listen", greeterAddr)
		Expect(greeter.Start()).To(Succeed())
		DeferCleanup(func() { _ = greeter.Process.Kill(); _ = greeter.Wait() })
		proxy, _ := startAddonProxy(ctx, "--upstream", "http://"+greeterAddr, "--audience", "greeter.addons.svc")

		user := fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}",
			base64.StdEncoding.EncodeToString(cluster.Admin.CertData), base64.StdEncoding.EncodeToString(cluster.Admin.KeyData))
		caller := exec.CommandContext(ctx, buildExample("addon/caller"), "--kubeconfig", writeKubeconfig(user),
			"--url", proxy, "--namespace", ns, "--serviceaccount", "caller")
		out, err := caller.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("hello system:serviceaccount:" + ns + ":caller\n"))

		code, body, _ := get(proxy+"/", "", nil)
		Expect(code).To(Equal(401), body) // without a token, the greeter is never reached
	}, NodeTimeout(2*time.Minute))
})
