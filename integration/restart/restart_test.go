// Package restart runs the API server restart scenarios (a plain restart, a
// restart with a new serving CA) in a suite of their own: restarting the
// shared API server would disturb the other specs.
package restart

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/authvault/authvault/addonauth"
	"github.com/authvault/authvault/login"
	"github.com/authvault/authvault/testkit/testcluster"
	"github.com/authvault/authvault/vault"
)

var cluster *testcluster.Cluster

func TestRestart(t *testing.T) {
	testcluster.RunSuite(t, "authvault through an API server restart")
}

var _ = BeforeSuite(func() {
	var err error
	cluster, err = testcluster.Start()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if cluster != nil {
		Expect(cluster.Stop()).To(Succeed())
	}
})

// load is four workers creating ConfigMaps in a namespace, as fast as a
// controller would, until its context ends.
type load struct {
	wg       sync.WaitGroup
	mu       sync.Mutex // guards the fields below
	written  []string
	failures []error         // errors met before the load's end
	wrote    func(time.Time) // called under mu for each write
}

func startLoad(ctx context.Context, cs kubernetes.Interface, ns string, wrote func(time.Time)) *load {
	l := &load{wrote: wrote}
	for w := range 4 {
		l.wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("w%d-%d", w, i)
				callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := cs.CoreV1().ConfigMaps(ns).Create(callCtx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				cancel()
				now := time.Now()
				l.mu.Lock()
				switch {
				case err == nil:
					l.written = append(l.written, name)
					if l.wrote != nil {
						l.wrote(now)
					}
				case ctx.Err() == nil:
					l.failures = append(l.failures, err)
				}
				l.mu.Unlock()
				time.Sleep(20 * time.Millisecond) // a request rate, not a check
			}
		})
	}
	return l
}

// check expects no failure to be a 401 (what happened is no reason for
// one) or an AlreadyExists (a write applied twice), and every write that
// succeeded to be there, once, read through the vault by a
// controller-runtime client.
func (l *load) check(ctx context.Context, cfg *rest.Config, ns, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, err := range l.failures {
		Expect(apierrors.IsAlreadyExists(err)).To(BeFalse(), "a write was applied twice: %v", err)
		Expect(apierrors.IsUnauthorized(err)).To(BeFalse(), "%s is no reason for a 401: %v", what, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	var list corev1.ConfigMapList
	Expect(c.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	present := map[string]int{}
	for _, cm := range list.Items {
		present[cm.Name]++
	}
	for _, name := range l.written {
		Expect(present[name]).To(Equal(1), "write %s", name)
	}
}

// clientsetThrough returns a vault's REST config and a clientset with no
// client-side rate limit.
func clientsetThrough(ctx context.Context, v *vault.Vault) (*rest.Config, kubernetes.Interface) {
	cfg, err := v.RESTConfig(ctx)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS = -1
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return cfg, cs
}

func newNamespace(ctx context.Context, prefix string) string {
	admin, err := kubernetes.NewForConfig(cluster.Admin)
	Expect(err).NotTo(HaveOccurred())
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return ns.Name
}

// Ordered: the CA rotation comes last, since it may change the admin's
// client CA along with the serving one.
var _ = Describe("An API server restart mid-load, then a CA rotation", Ordered, func() {
	It("is survived by the vault and a controller-runtime client, with no write lost or applied twice", func(ctx SpecContext) {
		ns := newNamespace(ctx, "restart")
		v := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(v.Close)
		v.OnLogin(func(context.Context) (*login.ConnectionInfo, error) {
			info := cluster.Token(cluster.Issuer.Issue(0))
			return &info, nil
		}, login.ID("issuer"))
		cfg, cs := clientsetThrough(ctx, v)

		restarted := make(chan struct{})
		afterRestart := 0 // guarded by the load's mu
		loadCtx, stop := context.WithCancel(ctx)
		defer stop()
		l := startLoad(loadCtx, cs, ns, func(time.Time) {
			select {
			case <-restarted:
				afterRestart++
			default:
			}
		})
		time.Sleep(3 * time.Second) // load before the restart
		Expect(cluster.RestartAPIServer(2 * time.Second)).To(Succeed())
		close(restarted)
		// The load goes on until writes go through again, not for a
		// fixed time: on a busy machine the restart alone may take most
		// of a fixed window (it left one write after the restart, in 25 s,
		// beside two busy loops).
		Eventually(func() int {
			l.mu.Lock()
			defer l.mu.Unlock()
			return afterRestart
		}).WithTimeout(time.Minute).Should(BeNumerically(">=", 20), "writes after the restart")
		stop()
		l.wg.Wait()

		l.mu.Lock()
		report := fmt.Sprintf("restart: %d writes (%d after the restart), %d failed while the server was down", len(l.written), afterRestart, len(l.failures))
		l.mu.Unlock()
		AddReportEntry("figure", report)
		fmt.Fprintln(GinkgoWriter, report)
		Expect(afterRestart).To(BeNumerically(">", 0), "the vault served again after the restart")
		l.check(ctx, cfg, ns, "a restart")
	}, NodeTimeout(3*time.Minute))

	It("addonauth serves the callers it reviewed recently while the API server is down, refuses new ones with 503, and recovers", func(ctx SpecContext) {
		ns := newNamespace(ctx, "addon-outage")
		admin, err := kubernetes.NewForConfig(cluster.Admin)
		Expect(err).NotTo(HaveOccurred())
		token := func(name string) string {
			_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
				Spec: authnv1.TokenRequestSpec{Audiences: []string{"greeter.addons.svc"}},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return tr.Status.Token
		}
		known, fresh := token("known"), token("fresh")
		a, err := addonauth.New(addonauth.Options{Audience: "greeter.addons.svc", Config: cluster.Admin,
			SuccessTTL: time.Second, StaleIfError: time.Minute, ReviewTimeout: time.Second})
		Expect(err).NotTo(HaveOccurred())
		srv := httptest.NewServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(r.Header.Get("X-Authenticated-User")))
		})))
		DeferCleanup(srv.Close)
		status := func(tok string) int {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			return resp.StatusCode
		}
		Expect(status(known)).To(Equal(200))

		restarted := make(chan error, 1)
		go func() { restarted <- cluster.RestartAPIServer(8 * time.Second) }()
		// Down, for 8 s from now: the stop itself takes a while on a busy
		// machine, so wait for it rather than for a fixed time.
		server, err := url.Parse(cluster.Server)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			conn, err := net.DialTimeout("tcp", server.Host, time.Second)
			if err == nil {
				conn.Close()
			}
			return err
		}).WithTimeout(time.Minute).WithPolling(50*time.Millisecond).Should(HaveOccurred(), "the API server to stop")
		time.Sleep(1500 * time.Millisecond) // known's review has aged out (SuccessTTL 1 s)
		Expect(status(known)).To(Equal(200), "a token reviewed a moment ago is served while the API server is down")
		Expect(status(fresh)).To(Equal(503), "a token never reviewed cannot be vouched for")
		Expect(<-restarted).To(Succeed())
		start := time.Now()
		Eventually(func() int { return status(fresh) }).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal(200))
		report := fmt.Sprintf("addonauth outage: known token served while the API server was down, a new one refused with 503, served %v after the restart", time.Since(start).Round(10*time.Millisecond))
		AddReportEntry("figure", report)
		fmt.Fprintln(GinkgoWriter, report)
	}, NodeTimeout(2*time.Minute))

	It("addonauth serves the tokens of a changed service-account issuer, and of the old one, without a new Authenticator", func(ctx SpecContext) {
		const aud, newIssuer = "greeter.addons.svc", "https://issuer-b.authvault.test"
		ns := newNamespace(ctx, "addon-issuer")
		admin, err := kubernetes.NewForConfig(cluster.Admin)
		Expect(err).NotTo(HaveOccurred())
		token := func(name string) string {
			_, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
				Spec: authnv1.TokenRequestSpec{Audiences: []string{aud}},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return tr.Status.Token
		}
		issuerOf := func(tok string) string {
			parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
			Expect(err).NotTo(HaveOccurred())
			var claims jwt.Claims
			Expect(parsed.UnsafeClaimsWithoutVerification(&claims)).To(Succeed())
			return claims.Issuer
		}
		old := token("before")
		oldIssuer := issuerOf(old)
		// One Authenticator reviews, the other verifies locally only: it
		// serves the new issuer's token only if it learnt the issuer.
		reviewing, err := addonauth.New(addonauth.Options{Audience: aud, Config: cluster.Admin, KeyRefetchInterval: time.Second})
		Expect(err).NotTo(HaveOccurred())
		local, err := addonauth.New(addonauth.Options{Audience: aud, Config: cluster.Admin, KeyRefetchInterval: time.Second, NoReview: true})
		Expect(err).NotTo(HaveOccurred())
		for _, a := range []*addonauth.Authenticator{reviewing, local} {
			_, err := a.Authenticate(ctx, old)
			Expect(err).NotTo(HaveOccurred(), "a token of the first issuer")
		}

		Expect(cluster.RestartAPIServerWithIssuers(0, newIssuer, oldIssuer)).To(Succeed())
		fresh := token("after")
		Expect(issuerOf(fresh)).To(Equal(newIssuer))
		for name, a := range map[string]*addonauth.Authenticator{"reviewing": reviewing, "NoReview": local} {
			for what, tok := range map[string]string{"the new issuer's": fresh, "the old issuer's": old} {
				// The API server is up (its start waits for healthz), but
				// may still be readying its authenticators.
				Eventually(func() error { _, err := a.Authenticate(ctx, tok); return err }).
					WithTimeout(20*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "%s: %s token", name, what)
			}
		}
		// Started after the change, an Authenticator knows only the issuer
		// discovery names: the old issuer's token is reviewed, and served.
		after, err := addonauth.New(addonauth.Options{Audience: aud, Config: cluster.Admin})
		Expect(err).NotTo(HaveOccurred())
		_, err = after.Authenticate(ctx, old)
		Expect(err).NotTo(HaveOccurred(), "the old issuer's token, by an Authenticator started after the change")
	}, NodeTimeout(2*time.Minute))

	It("a CA rotation is survived without a restart once the CA file holds the new CA, with no write lost or applied twice", func(ctx SpecContext) {
		ns := newNamespace(ctx, "ca-rotation")
		caFile := filepath.Join(GinkgoT().TempDir(), "ca.crt")
		Expect(os.WriteFile(caFile, cluster.CAData, 0o600)).To(Succeed())
		v := vault.New(vault.Options{NoFallback: true})
		DeferCleanup(v.Close)
		var tlsLogins atomic.Int32
		v.OnLogin(func(ctx context.Context) (*login.ConnectionInfo, error) {
			if reason, _ := login.ReasonFrom(ctx); reason.Kind == login.TLSFailure {
				tlsLogins.Add(1)
			}
			return &login.ConnectionInfo{Server: cluster.Server, CAPath: caFile, Token: cluster.Issuer.Issue(0)}, nil
		}, login.ID("issuer-with-ca-file"), login.Backoff(250*time.Millisecond, time.Second))
		cfg, cs := clientsetThrough(ctx, v)

		// Guarded by the load's mu: when the CA file was updated, the first
		// write after that, and the logins for a TLS failure until each.
		var caUpdated, firstAfter time.Time
		var loginsAtUpdate, loginsAtRecovery int32
		loadCtx, stop := context.WithCancel(ctx)
		defer stop()
		l := startLoad(loadCtx, cs, ns, func(at time.Time) {
			if !caUpdated.IsZero() && firstAfter.IsZero() {
				firstAfter, loginsAtRecovery = at, tlsLogins.Load()
			}
		})
		time.Sleep(3 * time.Second) // load before the rotation
		rotation := time.Now()
		newCA, err := cluster.RotateServingCA(time.Second)
		Expect(err).NotTo(HaveOccurred())
		time.Sleep(2 * time.Second) // the new CA reaches the file later, as a mounted ConfigMap does
		l.mu.Lock()
		caUpdated, loginsAtUpdate = time.Now(), tlsLogins.Load()
		l.mu.Unlock()
		Expect(os.WriteFile(caFile, newCA, 0o600)).To(Succeed())
		// The load goes on until a write goes through, not for a fixed
		// time: on a busy machine the API server's restart alone took all
		// of a fixed 20 s window.
		Eventually(func() time.Time {
			l.mu.Lock()
			defer l.mu.Unlock()
			return firstAfter
		}).WithTimeout(time.Minute).ShouldNot(BeZero(), "no write went through after the CA file was updated")
		stop()
		l.wg.Wait()

		l.mu.Lock()
		recovery, window := firstAfter.Sub(caUpdated), firstAfter.Sub(rotation)
		report := fmt.Sprintf("CA rotation: %d writes, %d failed while the server was down or its CA unknown, %d logins for a TLS failure; the first write %v after the CA file was updated",
			len(l.written), len(l.failures), tlsLogins.Load(), recovery.Round(time.Millisecond))
		l.mu.Unlock()
		AddReportEntry("figure", report)
		fmt.Fprintln(GinkgoWriter, report)
		Expect(tlsLogins.Load()).To(BeNumerically(">", 0), "the handler was told of the TLS failure")
		// What heals is the next login for a TLS failure, which reads the
		// new CA file: counted in logins, not seconds, so that a slow
		// machine cannot fail it. One login may have read the file just
		// before it changed.
		Expect(loginsAtRecovery-loginsAtUpdate).To(BeNumerically("<=", 2), "logins for a TLS failure after the CA file was updated, before a write went through")
		// A backoff of 250 ms doubling to 1 s (its jitter only adds) over
		// the TLS failures, which lie within window: three logins to reach
		// the cap, then at most one a second; not one per failed request
		// (four writers, one every 20 ms each).
		most := 3 + int32(window/time.Second) + 1
		Expect(tlsLogins.Load()).To(BeNumerically("<=", most), "logins for TLS failures in %v are spaced by a growing backoff", window)
		l.check(ctx, cfg, ns, "a CA rotation")
	}, NodeTimeout(3*time.Minute))
})
